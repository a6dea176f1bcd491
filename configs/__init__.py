"""Run configs (`configs/leap.py[:variant]`): data, installed with the package."""

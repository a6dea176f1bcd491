"""Processes the tests start (launch/*.py, benchmarks) import this checkout,
as pytest itself does (pyproject's pythonpath), whether or not the package
is installed (`pip install -e .`)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if p and p != ROOT])

"""Loads a benchmarks/ script (not a package) as a module for its tests."""

import importlib.util
import os

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def path(name: str) -> str:
  return os.path.join(ROOT, "benchmarks", f"{name}.py")


def load(name: str):
  """benchmarks/<name>.py as a module; the absl flags it defines are dropped
  again, so other scripts loaded in the same session can define theirs."""
  before = set(flags.FLAGS)
  spec = importlib.util.spec_from_file_location(f"{name}_under_test", path(name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  for flag in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, flag)
  return module

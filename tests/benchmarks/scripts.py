"""Loads a benchmarks/ script (not a package) as a module for its tests."""

import ast
import importlib.util
import os

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def path(name: str) -> str:
  return os.path.join(ROOT, "benchmarks", f"{name}.py")


def defined_flags(source: str) -> set[str]:
  """Names the source passes first to a flags.DEFINE_* call."""
  return {node.args[0].value for node in ast.walk(ast.parse(source))
          if isinstance(node, ast.Call)
          and isinstance(node.func, ast.Attribute)
          and node.func.attr.startswith("DEFINE") and node.args
          and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)}


def load(name: str):
  """benchmarks/<name>.py as a module. Its absl flags are dropped again, and
  a flag of the same name that another module holds in this session (a
  launch/ script's --workdir, say) is set aside while it loads and put back
  after."""
  with open(path(name)) as f:
    names = defined_flags(f.read())
  held = {n: flags.FLAGS[n] for n in names if n in flags.FLAGS}
  for n in held:
    delattr(flags.FLAGS, n)
  before = set(flags.FLAGS)
  try:
    spec = importlib.util.spec_from_file_location(f"{name}_under_test",
                                                  path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  finally:
    for n in set(flags.FLAGS) - before:
      delattr(flags.FLAGS, n)
    for n, flag in held.items():
      flags.FLAGS[n] = flag
  return module

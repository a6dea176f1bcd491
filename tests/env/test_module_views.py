"""The candidate's views of subset modules and the checked wraps/dataclass."""

import dataclasses
import functools
import sys
import types

import jax
import numpy as np
import pytest

from leap_jax.env import allowlist
from leap_jax.env import module_views

CANDIDATE = module_views.CANDIDATE_FILENAME


def _record(what):
  return PermissionError(what)


def _candidate(source: str) -> dict:
  """Runs `source` as the worker runs candidate code (its filename and module)."""
  module = types.ModuleType(module_views.CANDIDATE_MODULE)
  module.__dict__.update(
      functools=module_views.view("functools", _record),
      dataclasses=module_views.view("dataclasses", _record),
      jax=jax)
  saved = sys.modules.get(module_views.CANDIDATE_MODULE)
  sys.modules[module_views.CANDIDATE_MODULE] = module
  try:
    exec(compile(source, CANDIDATE, "exec"), module.__dict__)  # noqa: S102
  finally:
    if saved is None:
      sys.modules.pop(module_views.CANDIDATE_MODULE, None)
    else:
      sys.modules[module_views.CANDIDATE_MODULE] = saved
  return module.__dict__


def test_views_hold_only_the_subset():
  view = module_views.view("numpy", _record)
  for name in allowlist.MODULE_SUBSETS["numpy"]:
    assert getattr(view, name) is getattr(np, name)
  with pytest.raises(PermissionError, match=r"numpy.save \(allowed from numpy"):
    view.save  # noqa: B018
  assert module_views.view("jax.numpy", _record) is sys.modules["jax.numpy"]


def test_wraps_on_the_candidates_own_function():
  ns = _candidate(
      "def deco(fn):\n"
      "  @functools.wraps(fn)\n"
      "  def wrapped(x):\n"
      "    return fn(x) + 1\n"
      "  return wrapped\n"
      "@deco\n"
      "def inc(x):\n"
      "  '''doc'''\n"
      "  return x\n")
  assert ns["inc"](1) == 2 and ns["inc"].__name__ == "inc"
  assert ns["inc"].__doc__ == "doc"


@pytest.mark.parametrize("source", [
    "functools.wraps(lambda: 0)(jax.jit)",
    "class P:\n  jit = 1\nfunctools.wraps(P)(jax)",
    "@functools.wraps(jax.jit, updated=('__globals__',))\ndef f():\n  pass",
])
def test_wraps_refuses_anything_else(source):
  with pytest.raises(PermissionError, match="functools.wraps"):
    _candidate(source)


def test_dataclass_on_the_candidates_own_class():
  ns = _candidate(
      "@dataclasses.dataclass(frozen=True, slots=True)\n"
      "class Blocks:\n"
      "  bm: int = 64\n"
      "  bn: 'int' = 32\n"
      "  dims: tuple = (1, 2)\n"
      "  f: float = dataclasses.field(default=1.5)\n"
      "  @classmethod\n"
      "  def default(cls):\n"
      "    return cls()\n"
      "  @property\n"
      "  def area(self):\n"
      "    return self.bm * self.bn\n")
  blocks = ns["Blocks"].default()
  assert (blocks.bm, blocks.bn, blocks.area) == (64, 32, 2048)
  with pytest.raises(dataclasses.FrozenInstanceError):
    blocks.bm = 1


@pytest.mark.parametrize("source,why", [
    ("dataclasses.dataclass(jax.ShapeDtypeStruct)", "defined in your code"),
    ("class B(dict):\n  a: int = 1\ndataclasses.dataclass(B)", "plain class"),
    ("@dataclasses.dataclass(frozen=jax)\nclass C:\n  a: int = 1", "True/False"),
    ("class D:\n  __annotations__ = {'a b': int}\ndataclasses.dataclass(D)",
     "identifiers"),
    ("class G:\n  def __get__(self, o, t):\n    return 1\n"
     "@dataclasses.dataclass\nclass E:\n  a: int = G()", "class attribute 'a'"),
    ("@dataclasses.dataclass\nclass F:\n  a: list = dataclasses.field("
     "default=1, hash=jax)", "class attribute 'a'"),
])
def test_dataclass_refuses_what_could_run_or_inject_code(source, why):
  with pytest.raises(PermissionError, match=why):
    _candidate(source)

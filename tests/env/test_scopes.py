"""Which uses of a name reach the builtin: hand-written cases and, as the
reference, what the interpreter itself does with a builtin that records use."""

import ast
import textwrap

import pytest

from leap_jax.env import scopes

NAMES = frozenset({"input", "open"})


def _uses(source: str) -> list[tuple[str, str]]:
  source = textwrap.dedent(source)
  return [(u.name, u.scope)
          for u in scopes.builtin_uses(source, ast.parse(source), NAMES)]


@pytest.mark.parametrize("source", [
    "def f(input):\n  return input",
    "def f(x):\n  input = x\n  return input",
    "def f(x):\n  for open in x:\n    pass\n  return open",
    "f = lambda input: input",
    "v = [input for input in range(3)]",
    "def outer(open):\n  def inner():\n    return open\n  return inner",
    "def f(x):\n  try:\n    pass\n  except ValueError as input:\n    return 1",
    "def f():\n  import math as input\n  return input",
    "def f(x):\n  return x.input + x.open",   # attributes are not names
    "def f():\n  return g(input=1)",          # nor keyword arguments
])
def test_arguments_locals_and_closures_are_not_the_builtin(source):
  assert _uses(source) == []


@pytest.mark.parametrize("source,expected", [
    ("x = input", [("input", "module")]),
    ("input = 3", [("input", "module")]),
    ("def f():\n  return input('?')", [("input", "f")]),
    ("def f(open=open):\n  return open", [("open", "module")]),
    ("class C:\n  input = 1", [("input", "C")]),
    ("class C:\n  def m(self):\n    return open", [("open", "m")]),
    ("w = [open for open in [open]]", [("open", "module")]),
    ("def f():\n  return [open for _ in range(2)]", [("open", "listcomp")]),
])
def test_module_class_and_global_uses_are(source, expected):
  assert _uses(source) == expected


def test_lines_point_at_the_use():
  source = "import math\n\n\ndef f():\n  return input('?')\n"
  (use,) = scopes.builtin_uses(source, ast.parse(source), NAMES)
  assert use.line == 5


# The reference: run each snippet with builtins whose `input`/`open` record a
# call. Whenever the interpreter reaches the builtin, the analysis must have
# said so (it may say so more often: module-level names are dynamic).
_SNIPPETS = [
    "def f(input):\n  return input\nf(1)",
    "x = [input for input in range(2)]",
    "def f(open=open):\n  return open\nf()()",
    "def f():\n  return input\nf()()",
    "class C:\n  input = input\nC.input()",
    "w = [open for open in [open]][0]\nw()",
    "def g(x):\n  def h():\n    return x\n  return h\ng(open)()()",
    "input = 1\ndel input\ninput()",
    "def f():\n  input = 2\n  return input\nf()",
]


@pytest.mark.parametrize("source", _SNIPPETS)
def test_sound_against_the_interpreter(source):
  calls = []

  def recorder(name):
    return lambda *a: calls.append(name)
  env = {"__name__": "snippet", "__builtins__": {"input": recorder("input"), "open": recorder("open"),
                          "range": range, "__build_class__": __build_class__}}
  exec(compile(source, "<snippet>", "exec"), env)  # noqa: S102  (test code)
  if calls:
    assert {n for n, _ in _uses(source)} >= set(calls), source

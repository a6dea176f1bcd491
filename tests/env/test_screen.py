import hypothesis
import hypothesis.strategies as st
import pytest

from leap_jax.env import allowlist
from leap_jax.env.screen import screen_source
from leap_jax.env.verdict import Status

GOOD = """
import functools, math
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

def _k(x_ref, o_ref):
  o_ref[...] = x_ref[...]

def kernel(x):
  return pl.pallas_call(_k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""

PRELUDE = """
import dataclasses, functools, typing
import numpy as np
from jax.experimental.pallas import triton as plgpu
"""


def test_good_source_passes():
  assert screen_source(GOOD).status is None


@pytest.mark.parametrize("line", [
    "import os", "from os import path", "import kernels_pallas",
    "import leap_jax.env", "from jax import config", "from jax._src import core",
    "import jax.experimental.pallas.tpu", "from . import x", "from jax.numpy import *",
    "x = __builtins__", "f = open('/etc/passwd')", "eval('1')", "exec('x=1')",
    "y = getattr(jax, 'config')", "z = ().__class__", "jnp.allclose = None",
    "jax.pure_callback(f, None)", "jax.debug.print('x')", "jnp.save('f', 1)",
    "global q", "pl.pallas_call(f, interpret=True)", "t = jax.device_get(1)",
    # Judged by what the name resolves to.
    "jnp.load('f')", "from jax.numpy import load", "import numpy.linalg",
    "np.save('f', 1)", "np.testing.assert_allclose(1, 1)", "np.random.seed(0)",
    "np.seterr(all='ignore')", "jax.config.update('jax_disable_jit', True)",
    "jax.disable_jit()", "jax.debug_nans(True)", "jax.checking_leaks()",
    "pl.enable_debug_checks(True)", "jax.experimental.io_callback(f, None)",
    "from jax.experimental.pallas import tpu", "typing.get_type_hints(f)",
    "functools.update_wrapper(jax, f)", "m = jax.numpy", "p = pl.triton",
    "jax.lax.add_p.def_impl(f)", "p = jax.lax.add_p\np.def_impl(f)",
    "np.float32(1).tofile('x')", "import numpy as np\nh = np.finfo(1).dump('x')",
    "jax.jit(f).lower(1).compile({'xla_dump_to': '/tmp'})",
    # Decorator-only members.
    "functools.wraps(f)(jax.jit)", "w = functools.wraps",
    "@functools.wraps\ndef g(): pass",
    "@functools.wraps(jax.jit, updated=('__globals__',))\ndef g(): pass",
    "dataclasses.dataclass(jax.ShapeDtypeStruct)",
    "@dataclasses.dataclass(frozen=jax)\nclass C:\n  a: int = 1",
    "from functools import wraps\nwraps(f)(pl.pallas_call)",
    # Builtins where scoping makes them the builtin.
    "input = 3", "def f(open=open):\n  return open", "class C:\n  input = 1",
    "def f():\n  return input('x')", "x = [type for _ in range(2)]",
    # __name__ only in `if __name__ == "__main__":`.
    "y = __name__", "if __name__ == 'candidate':\n  pass",
    "if __name__ != '__main__':\n  pass", "s = '__main__'",
    "if __name__ == '__main__': import os",
    "if __name__ == '__main__':\n  pass\nelse:\n  import os",
], ids=lambda line: line.replace("\n", " | "))
def test_forbidden_constructs(line):
  result = screen_source(PRELUDE + GOOD + "\n" + line + "\n")
  assert result.status is Status.FORBIDDEN, line
  assert "Line" in result.detail


@pytest.mark.parametrize("snippet", [
    "from __future__ import annotations",
    "def k2(x_ref, o_ref):\n  plgpu.store(o_ref.at[pl.ds(0, 8)],"
    " plgpu.load(x_ref.at[pl.ds(0, 8)], mask=None), mask=None)",
    "from jax.experimental.pallas.triton import load, store",
    "params = plgpu.CompilerParams(num_warps=4, num_stages=2)",
    "def f(input):\n  return input + 1",
    "def f(x):\n  type = x.dtype\n  input = x\n  return type, input",
    "g = lambda input: input", "v = [input for input in range(3)]",
    "def outer(open):\n  def inner():\n    return open\n  return inner",
    "def deco(fn):\n  @functools.wraps(fn)\n  def wrapped(*a):\n    return fn(*a)\n"
    "  return wrapped",
    "from functools import wraps\ndef deco(fn):\n  @wraps(fn)\n  def w(x):\n"
    "    return fn(x)\n  return w",
    "@dataclasses.dataclass(frozen=True, slots=True)\nclass B:\n  bm: int = 64",
    "@dataclasses.dataclass\nclass B:\n  bm: int = 64",
    "class B(typing.NamedTuple):\n  bm: int = 64\n  bn: int = 32",
    "n = int(np.prod((4, 8)))", "lo = float(np.finfo(np.float32).min)",
    "big = -0.7 * float(np.finfo(np.dtype('float32')).max)",
    "if __name__ == '__main__':\n  import os\n  np.testing.assert_allclose(1, 1)",
    "acc = jax.lax.fori_loop(0, 4, lambda i, a: a + i, 0)",
    "n = pl.cdiv(10, 4)", "t = jax.tree_util.tree_map(lambda a: a, [1])",
], ids=lambda s: s.splitlines()[0])
def test_expert_idioms_pass(snippet):
  result = screen_source(PRELUDE + GOOD + "\n" + snippet + "\n")
  assert result.status is None, result.detail


@pytest.mark.parametrize("line,named", [
    ("jnp.load('f')", "jax.numpy.load"),
    ("np.save('f', 1)", "np.save"),
    ("jax.debug_nans(True)", "jax._src.config"),
    ("import numpy.linalg", "numpy.linalg"),
    ("def f():\n  return input('x')", "'input'"),
    ("functools.wraps(f)(jax.jit)", "functools.wraps"),
    ("p = pl.triton", "pl.triton"),
])
def test_feedback_names_what_was_refused(line, named):
  result = screen_source(PRELUDE + GOOD + "\n" + line + "\n")
  assert named in result.detail, result.detail


_PLAIN_BUILTINS = sorted(n for n in allowlist.FORBIDDEN_NAMES
                         if not n.startswith("__"))


@hypothesis.given(st.sampled_from(_PLAIN_BUILTINS))
def test_a_builtin_name_as_argument_passes_and_as_module_name_does_not(name):
  as_argument = f"def f({name}):\n  return {name}\n"
  assert screen_source(GOOD + as_argument).status is None
  as_module_name = f"x = {name}\n"
  assert screen_source(GOOD + as_module_name).status is Status.FORBIDDEN


def test_first_refusal_by_line_is_reported():
  source = GOOD + "x = jnp.load('f')\ndef f():\n  import os\n"
  line = source.splitlines().index("x = jnp.load('f')") + 1
  assert screen_source(source).detail.startswith(f"Line {line}:")


def test_syntax_error_reports_line():
  result = screen_source("def kernel(x):\n  return (x\n")
  assert result.status is Status.SYNTAX_ERROR
  assert "line" in result.detail


def test_missing_entry_point():
  result = screen_source(GOOD.replace("def kernel(", "def kern("))
  assert result.status is Status.MISSING_ENTRY_POINT


def test_entry_point_by_assignment():
  assert screen_source(GOOD.replace("def kernel(", "def k2(") + "kernel = k2\n").status is None

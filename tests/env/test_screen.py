import pytest

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


def test_good_source_passes():
  assert screen_source(GOOD).status is None


@pytest.mark.parametrize("line", [
    "import os", "import numpy as np", "from os import path", "import kernels_pallas",
    "import leap_jax.env", "from jax import config", "from jax._src import core",
    "import jax.experimental.pallas.tpu", "from . import x", "from jax.numpy import *",
    "x = __builtins__", "f = open('/etc/passwd')", "eval('1')", "exec('x=1')",
    "y = getattr(jax, 'config')", "z = ().__class__", "jnp.allclose = None",
    "jax.pure_callback(f, None)", "jax.debug.print('x')", "jnp.save('f', 1)",
    "global q", "pl.pallas_call(f, interpret=True)", "t = jax.device_get(1)",
])
def test_forbidden_constructs(line):
  result = screen_source(GOOD + "\n" + line + "\n")
  assert result.status is Status.FORBIDDEN, line
  assert "Line" in result.detail


def test_syntax_error_reports_line():
  result = screen_source("def kernel(x):\n  return (x\n")
  assert result.status is Status.SYNTAX_ERROR
  assert "line" in result.detail


def test_missing_entry_point():
  result = screen_source(GOOD.replace("def kernel(", "def kern("))
  assert result.status is Status.MISSING_ENTRY_POINT


def test_entry_point_by_assignment():
  assert screen_source(GOOD.replace("def kernel(", "def k2(") + "kernel = k2\n").status is None

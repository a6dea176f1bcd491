"""Shared candidates for the environment tests (task level1/vector_add)."""

import pytest

GOOD = '''
import jax
from jax.experimental import pallas as pl

def _add(x_ref, y_ref, o_ref):
  o_ref[...] = BODY

def kernel(x, y):
  spec = pl.BlockSpec((8192,), lambda i: (i,))
  return pl.pallas_call(_add, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        grid=(x.shape[0] // 8192,), in_specs=[spec, spec],
                        out_specs=spec)(x, y)
'''


def vector_add(body: str = "x_ref[...] + y_ref[...]", prelude: str = "") -> str:
  """A vector_add answer whose kernel body (and module prelude) is given."""
  return "```python\n" + prelude + GOOD.replace("BODY", body) + "```\n"


@pytest.fixture
def make_vector_add():
  return vector_add

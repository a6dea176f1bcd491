"""level2/geglu_act: GEGLU activation on a packed [gate | up] input."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
GEGLU activation. Input x: float32 [1024, 1024], the first 512 columns the
gate g, the last 512 the value u. Output: float32 [1024, 512],
out = gelu(g) * u with the tanh form
gelu(g) = 0.5 * g * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g**3)))."""
ATOL = 1e-5
RTOL = 1e-5
N, D2 = 1024, 1024
BLOCK_N = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D2), 2.0))


def reference(x):
  g, u = jnp.split(x, 2, axis=1)
  gelu = 0.5 * g * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                   * (g + 0.044715 * g**3)))
  return gelu * u


def _geglu_kernel(g_ref, u_ref, o_ref):
  g = g_ref[...]
  gelu = 0.5 * g * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                   * (g + 0.044715 * g * g * g)))
  o_ref[...] = gelu * u_ref[...]


def solution(x):
  n, d2 = x.shape
  d = d2 // 2
  # The same array enters twice: column block 0 is the gate, block 1 the
  # value, so no split copy is made.
  return pl.pallas_call(
      _geglu_kernel,
      out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0)),
                pl.BlockSpec((BLOCK_N, d), lambda i: (i, 1))],
      out_specs=pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0)),
  )(x, x)

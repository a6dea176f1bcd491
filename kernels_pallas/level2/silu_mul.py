"""level2/silu_mul: SwiGLU's elementwise part, silu(gate) * up."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
SiLU-gated product. Inputs: gate float32 [1024, 512], up float32
[1024, 512]. Output: float32 [1024, 512],
out = gate / (1 + exp(-gate)) * up."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 2.0), ((N, D), 1.0))


def reference(gate, up):
  return gate / (1.0 + jnp.exp(-gate)) * up


def _silu_mul_kernel(g_ref, u_ref, o_ref):
  g = g_ref[...]
  o_ref[...] = g / (1.0 + jnp.exp(-g)) * u_ref[...]


def solution(gate, up):
  n, d = gate.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _silu_mul_kernel,
      out_shape=jax.ShapeDtypeStruct(gate.shape, gate.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row, row],
      out_specs=row,
  )(gate, up)

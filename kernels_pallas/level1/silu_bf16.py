"""level1/silu_bf16: SiLU on bfloat16 data, computed in float32."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
bfloat16 SiLU. Input x: bfloat16 [1024, 1024]. Output: bfloat16 [1024, 1024],
out = x / (1 + exp(-x)), computed in float32 and rounded to bfloat16."""
ATOL = _blocks.BF16_ATOL
RTOL = _blocks.BF16_RTOL
N, D = 1024, 1024
BLOCK_N = 64


def make_inputs(key):
  return _blocks.bf16(*_blocks.normals(key, ((N, D), 3.0)))


def reference(x):
  x = x.astype(jnp.float32)
  return (x / (1.0 + jnp.exp(-x))).astype(jnp.bfloat16)


def _silu_bf16_kernel(x_ref, o_ref):
  # Upcast once: exp and the division in bf16 would lose most of the bits.
  x = x_ref[...].astype(jnp.float32)
  o_ref[...] = (x / (1.0 + jnp.exp(-x))).astype(o_ref.dtype)


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _silu_bf16_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)

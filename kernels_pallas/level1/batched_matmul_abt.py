"""level1/batched_matmul_abt: per-batch a @ b.T (attention-score shape)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Batched matrix multiply with transposed b. Inputs: a float32 [16, 256, 64],
b float32 [16, 256, 64]. Output: float32 [16, 256, 256],
out[z] = a[z] @ b[z].T (out[z, i, j] = sum_k a[z, i, k] * b[z, j, k])."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, M, K = 16, 256, 64
BLOCK_M = 128


def make_inputs(key):
  return _blocks.normals(key, ((B, M, K), 1.0), ((B, M, K), _blocks.fan_in(K)))


def reference(a, b):
  return jnp.einsum("zik,zjk->zij", a, b)


def _bmm_abt_kernel(a_ref, b_ref, o_ref):
  # K = 64 fits in one dot; contract both operands on their last axis.
  o_ref[...] = jax.lax.dot_general(a_ref[...], b_ref[...],
                                   (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.float32)


def solution(a, b):
  batch, m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _bmm_abt_kernel,
      out_shape=jax.ShapeDtypeStruct((batch, m, n), jnp.float32),
      grid=(batch, m // BLOCK_M),
      in_specs=[pl.BlockSpec((None, BLOCK_M, k), lambda z, i: (z, i, 0)),
                pl.BlockSpec((None, n, k), lambda z, i: (z, 0, 0))],
      out_specs=pl.BlockSpec((None, BLOCK_M, n), lambda z, i: (z, i, 0)),
  )(a, b)

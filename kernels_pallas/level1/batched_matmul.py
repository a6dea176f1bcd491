"""level1/batched_matmul: one matrix product per batch entry."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Batched matrix multiply. Inputs: a float32 [8, 128, 512], b float32
[8, 512, 256]. Output: float32 [8, 128, 256], out[i] = a[i] @ b[i]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, M, K, N = 8, 128, 512, 256
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


def make_inputs(key):
  return _blocks.normals(key, ((B, M, K), 1.0), ((B, K, N), _blocks.fan_in(K)))


def reference(a, b):
  return jnp.einsum("bmk,bkn->bmn", a, b)


def _bmm_kernel(a_ref, b_ref, o_ref):
  # The batch axis is squeezed out of the blocks (None in block_shape), so
  # the kernel sees plain 2-D strips: [BLOCK_M, K] and [K, BLOCK_N].
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)


def solution(a, b):
  batch, m, k = a.shape
  n = b.shape[2]
  return pl.pallas_call(
      _bmm_kernel,
      out_shape=jax.ShapeDtypeStruct((batch, m, n), jnp.float32),
      grid=(batch, m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((None, BLOCK_M, k), lambda z, i, j: (z, i, 0)),
                pl.BlockSpec((None, k, BLOCK_N), lambda z, i, j: (z, 0, j))],
      out_specs=pl.BlockSpec((None, BLOCK_M, BLOCK_N),
                             lambda z, i, j: (z, i, j)),
  )(a, b)

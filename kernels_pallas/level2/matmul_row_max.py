"""level2/matmul_row_max: max over each row of a matrix product."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix multiply followed by a row max. Inputs: a float32 [512, 256], b
float32 [256, 512]. Output: float32 [512], out[i] = max_j (a @ b)[i, j]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 512, 256, 512
BLOCK_M, BLOCK_N, BLOCK_K = 32, 128, 64


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(a, b):
  return jnp.max(a @ b, axis=1)


def _matmul_row_max_kernel(a_ref, b_ref, o_ref):
  # Walk N in BLOCK_N column tiles, keeping only a running row max: the
  # [BLOCK_M, N] product never exists at once.
  def tile(j, best):
    col = pl.multiple_of(j * BLOCK_N, BLOCK_N)

    def body(k, acc):
      start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
      return acc + jnp.dot(a_ref[:, pl.ds(start, BLOCK_K)],
                           b_ref[pl.ds(start, BLOCK_K), pl.ds(col, BLOCK_N)],
                           preferred_element_type=jnp.float32)

    h = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                          jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32))
    return jnp.maximum(best, jnp.max(h, axis=1))

  o_ref[...] = jax.lax.fori_loop(0, b_ref.shape[1] // BLOCK_N, tile,
                                 jnp.full((BLOCK_M,), -jnp.inf, jnp.float32))


def solution(a, b):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _matmul_row_max_kernel,
      out_shape=jax.ShapeDtypeStruct((m,), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i: (i, 0)),
                pl.BlockSpec((k, n), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((BLOCK_M,), lambda i: (i,)),
  )(a, b)

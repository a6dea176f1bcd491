"""level2/matmul_add_matmul: sum of two matrix products, one accumulator."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Sum of two matrix products. Inputs: a float32 [256, 256], b float32
[256, 512], c float32 [256, 128], d float32 [128, 512]. Output: float32
[256, 512], out = a @ b + c @ d."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K1, K2, N = 256, 256, 128, 512
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


def make_inputs(key):
  return _blocks.normals(key, ((M, K1), 1.0), ((K1, N), _blocks.fan_in(K1)),
                         ((M, K2), 1.0), ((K2, N), _blocks.fan_in(K2)))


def reference(a, b, c, d):
  return a @ b + c @ d


def _matmul_add_matmul_kernel(a_ref, b_ref, c_ref, d_ref, o_ref):
  # Both products accumulate into one register tile.
  def dot_loop(x_ref, y_ref, acc):
    def body(k, acc):
      start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
      return acc + jnp.dot(x_ref[:, pl.ds(start, BLOCK_K)],
                           y_ref[pl.ds(start, BLOCK_K), :],
                           preferred_element_type=jnp.float32)
    return jax.lax.fori_loop(0, x_ref.shape[1] // BLOCK_K, body, acc)

  acc = dot_loop(a_ref, b_ref, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = dot_loop(c_ref, d_ref, acc)


def solution(a, b, c, d):
  m, k1 = a.shape
  k2, n = d.shape
  return pl.pallas_call(
      _matmul_add_matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k1), lambda i, j: (i, 0)),
                pl.BlockSpec((k1, BLOCK_N), lambda i, j: (0, j)),
                pl.BlockSpec((BLOCK_M, k2), lambda i, j: (i, 0)),
                pl.BlockSpec((k2, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b, c, d)

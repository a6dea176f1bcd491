"""level1/matmul_abt: matrix product with a transposed right operand."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix multiply with transposed b. Inputs: a float32 [512, 256], b float32
[1024, 256]. Output: float32 [512, 1024], out = a @ b.T
(out[i, j] = sum_k a[i, k] * b[j, k])."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 512, 256, 1024
BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((N, K), _blocks.fan_in(K)))


def reference(a, b):
  return a @ b.T


def _matmul_abt_kernel(a_ref, b_ref, o_ref):
  # b_ref is a [BLOCK_N, K] strip of b's rows; contracting both operands on
  # their last axis gives a @ b.T without materializing the transpose.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[:, pl.ds(start, BLOCK_K)]
    return acc + jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())),
                                     preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)


def solution(a, b):
  m, k = a.shape
  n = b.shape[0]
  return pl.pallas_call(
      _matmul_abt_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((BLOCK_N, k), lambda i, j: (j, 0))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b)

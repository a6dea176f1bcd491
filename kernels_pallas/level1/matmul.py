"""level1/matmul: dense matrix product."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix multiply. Inputs: a float32 [512, 256], b float32 [256, 1024].
Output: float32 [512, 1024], out = a @ b."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 512, 256, 1024
BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(a, b):
  return a @ b


def _matmul_kernel(a_ref, b_ref, o_ref):
  # GPU grid programs run in parallel, so the K reduction stays inside one
  # program: a_ref is a [BLOCK_M, K] row strip, b_ref a [K, BLOCK_N] column
  # strip, and the loop walks K in BLOCK_K slices, accumulating in registers.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)


def solution(a, b):
  m, k = a.shape
  _, n = b.shape
  return pl.pallas_call(
      _matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b)

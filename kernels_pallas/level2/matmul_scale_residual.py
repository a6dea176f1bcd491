"""level2/matmul_scale_residual: alpha * (a @ b) + c in one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Scaled matrix product plus a residual. Inputs: a float32 [512, 256],
b float32 [256, 512], c float32 [512, 512]. Output: float32 [512, 512],
out = 0.5 * (a @ b) + c."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 512, 256, 512
ALPHA = 0.5
BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)),
                         ((M, N), 1.0))


def reference(a, b, c):
  return ALPHA * (a @ b) + c


def _matmul_scale_residual_kernel(a_ref, b_ref, c_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    return acc + jnp.dot(a_ref[:, pl.ds(start, BLOCK_K)],
                         b_ref[pl.ds(start, BLOCK_K), :],
                         preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                          jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = ALPHA * acc + c_ref[...]


def solution(a, b, c):
  m, k = a.shape
  n = b.shape[1]
  tile = pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j))
  return pl.pallas_call(
      _matmul_scale_residual_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j)), tile],
      out_specs=tile,
  )(a, b, c)

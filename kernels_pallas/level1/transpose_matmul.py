"""level1/transpose_matmul: a.T @ b without materializing a.T."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Transposed-LHS matrix multiply. Inputs: a float32 [512, 256], b float32
[512, 512]. Output: float32 [256, 512], out = a.T @ b
(out[i, j] = sum_k a[k, i] * b[k, j])."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
K, M, N = 512, 256, 512
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


def make_inputs(key):
  return _blocks.normals(key, ((K, M), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(a, b):
  return a.T @ b


def _tmatmul_kernel(a_ref, b_ref, o_ref):
  # a_ref is a [K, BLOCK_M] column strip of a; contracting its axis 0
  # directly lets the compiler transpose tiles in registers.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[pl.ds(start, BLOCK_K), :]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jax.lax.dot_general(
        a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[0] // BLOCK_K, body, acc)


def solution(a, b):
  k, m = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _tmatmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((k, BLOCK_M), lambda i, j: (0, i)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b)

"""level1/matvec: matrix-vector product."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix-vector multiply. Inputs: a float32 [2048, 1024], x float32 [1024].
Output: float32 [2048], out = a @ x (out[i] = sum_k a[i, k] * x[k])."""
# Dot-level tolerance: padding x into a TF32 tensor-core dot is a fair choice.
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K = 2048, 1024
BLOCK_M, BLOCK_K = 32, 256


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((K,), _blocks.fan_in(K)))


def reference(a, x):
  return a @ x


def _matvec_kernel(a_ref, x_ref, o_ref):
  # A vector has no 16-wide axis for a tensor-core dot, so multiply and
  # reduce on the vector units instead; the loop bounds the live tile size.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    x = x_ref[pl.ds(start, BLOCK_K)]
    return acc + jnp.sum(a * x[None, :], axis=1)

  acc = jnp.zeros((BLOCK_M,), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)


def solution(a, x):
  m, k = a.shape
  return pl.pallas_call(
      _matvec_kernel,
      out_shape=jax.ShapeDtypeStruct((m,), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i: (i, 0)),
                pl.BlockSpec((k,), lambda i: (0,))],
      out_specs=pl.BlockSpec((BLOCK_M,), lambda i: (i,)),
  )(a, x)

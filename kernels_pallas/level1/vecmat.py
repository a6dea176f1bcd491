"""level1/vecmat: vector-matrix product."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Vector-matrix multiply. Inputs: x float32 [1024], a float32 [1024, 2048].
Output: float32 [2048], out = x @ a (out[j] = sum_k x[k] * a[k, j])."""
ATOL = 1e-4
RTOL = 1e-4
K, N = 1024, 2048
BLOCK_N, BLOCK_K = 128, 128


def make_inputs(key):
  return _blocks.normals(key, ((K,), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(x, a):
  return jnp.sum(x[:, None] * a, axis=0)


def _vecmat_kernel(x_ref, a_ref, o_ref):
  # A single vector is too thin for a tensor-core dot (sides >= 16), so
  # multiply-and-reduce over K chunks instead.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    x = x_ref[pl.ds(start, BLOCK_K)]
    a = a_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.sum(x[:, None] * a, axis=0)

  acc = jnp.zeros((a_ref.shape[1],), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[0] // BLOCK_K, body, acc)


def solution(x, a):
  k, n = a.shape
  return pl.pallas_call(
      _vecmat_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((k,), lambda j: (0,)),
                pl.BlockSpec((k, BLOCK_N), lambda j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda j: (j,)),
  )(x, a)

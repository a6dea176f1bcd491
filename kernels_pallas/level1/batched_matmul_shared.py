"""level1/batched_matmul_shared: a batch of matrices times one shared weight."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Batched matrix times a shared matrix. Inputs: x float32 [8, 256, 256],
w float32 [256, 128]. Output: float32 [8, 256, 128], out[z] = x[z] @ w
(the same w for every batch entry z)."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, M, K, N = 8, 256, 256, 128
BLOCK_M, BLOCK_K = 128, 64


def make_inputs(key):
  return _blocks.normals(key, ((B, M, K), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(x, w):
  return jnp.einsum("zmk,kn->zmn", x, w)


def _bmm_shared_kernel(x_ref, w_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    return acc + jnp.dot(x_ref[:, pl.ds(start, BLOCK_K)],
                         w_ref[pl.ds(start, BLOCK_K), :],
                         preferred_element_type=jnp.float32)

  acc = jnp.zeros(o_ref.shape, jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // BLOCK_K, body, acc)


def solution(x, w):
  batch, m, k = x.shape
  n = w.shape[1]
  # w's index map ignores the batch index: every program reads the same w.
  return pl.pallas_call(
      _bmm_shared_kernel,
      out_shape=jax.ShapeDtypeStruct((batch, m, n), jnp.float32),
      grid=(batch, m // BLOCK_M),
      in_specs=[pl.BlockSpec((None, BLOCK_M, k), lambda z, i: (z, i, 0)),
                pl.BlockSpec((k, n), lambda z, i: (0, 0))],
      out_specs=pl.BlockSpec((None, BLOCK_M, n), lambda z, i: (z, i, 0)),
  )(x, w)

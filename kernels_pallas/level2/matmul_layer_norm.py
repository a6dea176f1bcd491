"""level2/matmul_layer_norm: layer norm of a matrix product, one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix multiply followed by layer norm over the last axis. Inputs: a float32
[256, 256], b float32 [256, 256], gamma float32 [256], beta float32 [256].
Output: float32 [256, 256], with h = a @ b and per-row mean and biased var of
h: out = (h - mean) / sqrt(var + 1e-5) * gamma + beta."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 256, 256, 256
BLOCK_M, BLOCK_K = 32, 64


def make_inputs(key):
  k_ab, k_p = jax.random.split(key)
  a, b = _blocks.normals(k_ab, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)))
  gamma, beta = _blocks.normals(k_p, ((N,), 0.5), ((N,), 0.5))
  # A shared column offset in a gives rows of h means far from zero.
  return a + 1.0, b, 1.0 + gamma, beta


def reference(a, b, gamma, beta):
  h = a @ b
  mean = jnp.mean(h, axis=-1, keepdims=True)
  var = jnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
  return (h - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def _matmul_layer_norm_kernel(a_ref, b_ref, gamma_ref, beta_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    return acc + jnp.dot(a_ref[:, pl.ds(start, BLOCK_K)],
                         b_ref[pl.ds(start, BLOCK_K), :],
                         preferred_element_type=jnp.float32)

  h = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                        jnp.zeros(o_ref.shape, jnp.float32))
  centered = h - jnp.mean(h, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  normed = centered * jax.lax.rsqrt(var + 1e-5)
  o_ref[...] = normed * gamma_ref[...][None, :] + beta_ref[...][None, :]


def solution(a, b, gamma, beta):
  m, k = a.shape
  n = b.shape[1]
  vec = pl.BlockSpec((n,), lambda i: (0,))
  return pl.pallas_call(
      _matmul_layer_norm_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i: (i, 0)),
                pl.BlockSpec((k, n), lambda i: (0, 0)), vec, vec],
      out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
  )(a, b, gamma, beta)

"""level2/softmax_matmul: softmax(x, -1) @ w with the softmax fused in."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row softmax followed by a matrix multiply. Inputs: x float32 [256, 1024],
w float32 [1024, 256]. Output: float32 [256, 256], out = p @ w with
p[i, k] = exp(x[i, k]) / sum_j exp(x[i, j]) (softmax over the last axis of x).
Rows of x carry offsets of up to +-100: subtract each row's max before exp."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 256, 1024, 256
BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 64


def make_inputs(key):
  k_logits, k_offset, k_w = jax.random.split(key, 3)
  (logits,) = _blocks.normals(k_logits, ((M, K), 3.0))
  offset = jax.random.uniform(k_offset, (M, 1), jnp.float32, -100.0, 100.0)
  (w,) = _blocks.normals(k_w, ((K, N), 1.0))
  return logits + offset, w


def reference(x, w):
  e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
  return (e / jnp.sum(e, axis=-1, keepdims=True)) @ w


def _softmax_matmul_kernel(x_ref, w_ref, o_ref):
  n_chunks = x_ref.shape[1] // BLOCK_K

  def chunk(k):
    return x_ref[:, pl.ds(pl.multiple_of(k * BLOCK_K, BLOCK_K), BLOCK_K)]

  # Pass 1: running row max m and running sum l of exp(x - m), rescaling l
  # whenever m grows, so the whole row never sits in registers at once.
  def stats(k, carry):
    m, l = carry
    x = chunk(k)
    m_new = jnp.maximum(m, jnp.max(x, axis=1))
    l = l * jnp.exp(m - m_new) + jnp.sum(jnp.exp(x - m_new[:, None]), axis=1)
    return m_new, l

  m, l = jax.lax.fori_loop(
      0, n_chunks, stats, (jnp.full((BLOCK_M,), -jnp.inf, jnp.float32),
                           jnp.zeros((BLOCK_M,), jnp.float32)))

  # Pass 2: the unnormalized probabilities go straight into the dot.
  def matmul(k, acc):
    p = jnp.exp(chunk(k) - m[:, None])
    w = w_ref[pl.ds(pl.multiple_of(k * BLOCK_K, BLOCK_K), BLOCK_K), :]
    return acc + jnp.dot(p, w, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, n_chunks, matmul,
                          jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32))
  o_ref[...] = acc / l[:, None]


def solution(x, w):
  m, k = x.shape
  n = w.shape[1]
  return pl.pallas_call(
      _softmax_matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(x, w)

"""level3/sliding_window_attention: causal attention over a local window."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Causal sliding-window attention, window 64. Inputs: q, k, v float32
[2, 4, 512, 64] ([batch, heads, seq, head_dim]). Query i sees keys j with
i - 64 < j <= i (itself and the 63 before it). Output: float32
[2, 4, 512, 64], out[b, h] = softmax(s, axis=-1) @ v[b, h], with
s = q[b, h] @ k[b, h].T / sqrt(64) and s[i, j] = -inf outside the window."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, S, D = 2, 4, 512, 64
WINDOW = 64
BLOCK_Q, BLOCK_K = 64, 64


def make_inputs(key):
  qk = ((B, H, S, D), math.sqrt(2.5))
  return _blocks.normals(key, qk, qk, ((B, H, S, D), 1.0))


def reference(q, k, v):
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  i = jnp.arange(q.shape[2])[:, None]
  j = jnp.arange(k.shape[2])[None, :]
  s = jnp.where((j <= i) & (j > i - WINDOW), s, -jnp.inf)
  return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def _sliding_window_kernel(q_ref, k_ref, v_ref, o_ref):
  # With BLOCK_Q == BLOCK_K == WINDOW, query tile t only meets key tiles
  # t - 1 and t; every other tile is fully masked and skipped.
  t = pl.program_id(2)
  q0 = t * BLOCK_Q
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))
  rows = q0 + jax.lax.broadcasted_iota(jnp.int32, (BLOCK_Q, BLOCK_K), 0)

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    cols = start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    s = jnp.where((cols <= rows) & (cols > rows - WINDOW), s, -jnp.inf)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    l = l * alpha + jnp.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p, v,
                                         preferred_element_type=jnp.float32)
    return m_new, l, acc

  carry = (jnp.full((BLOCK_Q,), -jnp.inf, jnp.float32),
           jnp.zeros((BLOCK_Q,), jnp.float32),
           jnp.zeros((BLOCK_Q, q_ref.shape[-1]), jnp.float32))
  # The diagonal tile goes first: every row sees at least itself there, so
  # the running max is finite before tile t - 1, where some rows may be
  # fully masked (their p is exp(-inf) = 0 and alpha is 1).
  m, l, acc = body(t, carry)
  m, l, acc = jax.lax.cond(t > 0, lambda c: body(t - 1, c), lambda c: c,
                           (m, l, acc))
  o_ref[...] = acc / l[:, None]


def solution(q, k, v):
  batch, heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      _sliding_window_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

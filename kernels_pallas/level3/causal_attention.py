"""level3/causal_attention: causal multi-head attention, flash-style."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Causal scaled dot-product attention. Inputs: q, k, v float32
[2, 4, 512, 64] ([batch, heads, seq, head_dim]). Output: float32
[2, 4, 512, 64], for each batch b and head h, with
s = q[b, h] @ k[b, h].T / sqrt(64) and s[i, j] = -inf wherever j > i
(query i sees keys 0..i only): out[b, h] = softmax(s, axis=-1) @ v[b, h]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, S, D = 2, 4, 512, 64
BLOCK_Q, BLOCK_K = 64, 64


def make_inputs(key):
  qk = ((B, H, S, D), math.sqrt(2.5))
  return _blocks.normals(key, qk, qk, ((B, H, S, D), 1.0))


def reference(q, k, v):
  seq = q.shape[-2]
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
  p = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)
  return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def _causal_attention_kernel(q_ref, k_ref, v_ref, o_ref):
  q_block = pl.program_id(2)
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))
  q_pos = q_block * BLOCK_Q + jnp.arange(BLOCK_Q)[:, None]

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    k_pos = start + jnp.arange(BLOCK_K)[None, :]
    s = jnp.where(k_pos <= q_pos, s, -jnp.inf)
    # Key 0 is visible to every query, so m is finite after the first block.
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
  # Key blocks wholly after this query block are fully masked: skip them,
  # which halves the work on average.
  n_visible = ((q_block + 1) * BLOCK_Q + BLOCK_K - 1) // BLOCK_K
  _, l, acc = jax.lax.fori_loop(0, n_visible, body, carry)
  o_ref[...] = acc / l[:, None]


def solution(q, k, v):
  batch, heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      _causal_attention_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

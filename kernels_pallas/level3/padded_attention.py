"""level3/padded_attention: attention with per-sequence key padding."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Attention with key padding, not causal. Inputs: q, k, v float32
[4, 4, 256, 64] ([batch, heads, seq, head_dim]), lengths int32 [4]
(1 <= lengths[b] <= 256). Keys j >= lengths[b] of batch entry b are padding:
their scores are -inf. Output: float32 [4, 4, 256, 64],
out[b, h] = softmax(s, axis=-1) @ v[b, h], s = q[b, h] @ k[b, h].T / sqrt(64)
with s[:, j] = -inf for j >= lengths[b]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, S, D = 4, 4, 256, 64
BLOCK_Q, BLOCK_K = 128, 64


def make_inputs(key):
  k_qkv, k_len = jax.random.split(key)
  qk = ((B, H, S, D), math.sqrt(2.5))
  q, k, v = _blocks.normals(k_qkv, qk, qk, ((B, H, S, D), 1.0))
  # Lengths that are not multiples of the key tile, one of them short.
  lengths = jax.random.randint(k_len, (B,), 1, S + 1, jnp.int32)
  return q, k, v, lengths.at[0].set(37 + lengths[0] % 7)


def reference(q, k, v, lengths):
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  valid = jnp.arange(k.shape[2])[None, :] < lengths[:, None]  # [B, S]
  s = jnp.where(valid[:, None, None, :], s, -jnp.inf)
  return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def _padded_attention_kernel(len_ref, q_ref, k_ref, v_ref, o_ref):
  length = len_ref[pl.program_id(0)]
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    cols = start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    s = jnp.where(cols < length, s, -jnp.inf)
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
  # Only tiles holding at least one real key: the first tile always does,
  # so the running max is finite before any fully masked tile could appear.
  n_tiles = (length + BLOCK_K - 1) // BLOCK_K
  _, l, acc = jax.lax.fori_loop(0, n_tiles, body, carry)
  o_ref[...] = acc / l[:, None]


def solution(q, k, v, lengths):
  batch, heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      _padded_attention_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // BLOCK_Q),
      in_specs=[pl.BlockSpec((batch,), lambda b, h, i: (0,)),
                q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(lengths, q, k, v)

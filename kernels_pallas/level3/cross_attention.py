"""level3/cross_attention: queries attend to a longer, separate memory."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Cross-attention, not causal, query and key lengths differ. Inputs: q float32
[2, 4, 128, 64] ([batch, heads, query_len, head_dim]), k and v float32
[2, 4, 512, 64] ([batch, heads, key_len, head_dim]). Output: float32
[2, 4, 128, 64], out[b, h] = softmax(q[b, h] @ k[b, h].T / sqrt(64),
axis=-1) @ v[b, h]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, SQ, SK, D = 2, 4, 128, 512, 64
BLOCK_Q, BLOCK_K = 64, 128


def make_inputs(key):
  qk = math.sqrt(2.5)
  return _blocks.normals(key, ((B, H, SQ, D), qk), ((B, H, SK, D), qk),
                         ((B, H, SK, D), 1.0))


def reference(q, k, v):
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def _cross_attention_kernel(q_ref, k_ref, v_ref, o_ref):
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
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
  # The loop bound is the key length, not the query length.
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // BLOCK_K, body, carry)
  o_ref[...] = acc / l[:, None]


def solution(q, k, v):
  batch, heads, sq, dim = q.shape
  sk = k.shape[2]
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, sk, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      _cross_attention_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, sq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

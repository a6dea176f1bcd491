"""level3/mqa_attention: multi-query attention, one K/V head for all heads."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Multi-query attention, not causal. Inputs: q float32 [2, 8, 256, 64]
([batch, heads, seq, head_dim]), k and v float32 [2, 1, 256, 64] (one key
and value head shared by all 8 query heads). Output: float32 [2, 8, 256, 64],
out[b, h] = softmax(q[b, h] @ k[b, 0].T / sqrt(64), axis=-1) @ v[b, 0]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, S, D = 2, 8, 256, 64
BLOCK_Q, BLOCK_K = 128, 64


def make_inputs(key):
  qk = math.sqrt(2.5)
  return _blocks.normals(key, ((B, H, S, D), qk), ((B, 1, S, D), qk),
                         ((B, 1, S, D), 1.0))


def reference(q, k, v):
  s = jnp.einsum("bhqd,bkd->bhqk", q, k[:, 0]) / math.sqrt(q.shape[-1])
  return jnp.einsum("bhqk,bkd->bhqd", jax.nn.softmax(s, axis=-1), v[:, 0])


def _mqa_kernel(q_ref, k_ref, v_ref, o_ref):
  # Flash-style online softmax over BLOCK_K-key tiles (see level3/attention).
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
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // BLOCK_K, body, carry)
  o_ref[...] = acc / l[:, None]


def solution(q, k, v):
  batch, heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  # Every query head reads kv head 0 of its batch entry.
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, 0, 0, 0))
  return pl.pallas_call(
      _mqa_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

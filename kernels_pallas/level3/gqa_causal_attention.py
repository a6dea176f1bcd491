"""level3/gqa_causal_attention: causal grouped-query attention."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Causal grouped-query attention. Inputs: q float32 [2, 8, 256, 64]
([batch, query_heads, seq, head_dim]), k and v float32 [2, 2, 256, 64]
([batch, kv_heads, seq, head_dim]). Query head h uses kv head h // 4
(each kv head serves 4 consecutive query heads). Output: float32
[2, 8, 256, 64], for each batch b and query head h, with g = h // 4,
s = q[b, h] @ k[b, g].T / sqrt(64) and s[i, j] = -inf wherever j > i:
out[b, h] = softmax(s, axis=-1) @ v[b, g]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, HQ, HKV, S, D = 2, 8, 2, 256, 64
BLOCK_Q, BLOCK_K = 32, 64


def make_inputs(key):
  qk_scale = math.sqrt(2.5)
  return _blocks.normals(key, ((B, HQ, S, D), qk_scale),
                         ((B, HKV, S, D), qk_scale), ((B, HKV, S, D), 1.0))


def reference(q, k, v):
  group = q.shape[1] // k.shape[1]
  k = jnp.repeat(k, group, axis=1)
  v = jnp.repeat(v, group, axis=1)
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  causal = jnp.arange(s.shape[3])[None, :] <= jnp.arange(s.shape[2])[:, None]
  p = jax.nn.softmax(jnp.where(causal, s, -jnp.inf), axis=-1)
  return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def _gqa_causal_kernel(q_ref, k_ref, v_ref, o_ref):
  # q_ref holds BLOCK_Q queries of all `group` query heads that share this
  # kv head. Stacking them as rows of one matrix makes each K/V tile load
  # serve the whole group and gives the dots taller tiles.
  group, block_q, dim = q_ref.shape
  rows = group * block_q
  q = q_ref[...].reshape(rows, dim) * (1.0 / math.sqrt(dim))
  # Row r of the stacked block is query position q0 + r % block_q.
  q0 = pl.program_id(2) * block_q
  pos = q0 + jax.lax.broadcasted_iota(jnp.int32, (rows, BLOCK_K), 0) % block_q

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    cols = start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    s = jnp.where(cols <= pos, s, -jnp.inf)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    l = l * alpha + jnp.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p, v,
                                         preferred_element_type=jnp.float32)
    return m_new, l, acc

  carry = (jnp.full((rows,), -jnp.inf, jnp.float32),
           jnp.zeros((rows,), jnp.float32),
           jnp.zeros((rows, dim), jnp.float32))
  # Key tiles past the block's last query are fully masked: stop before them.
  # Tile 0 comes first and holds key 0, which every query sees, so the
  # running max is finite from the start.
  n_tiles = (q0 + block_q + BLOCK_K - 1) // BLOCK_K
  _, l, acc = jax.lax.fori_loop(0, n_tiles, body, carry)
  o_ref[...] = (acc / l[:, None]).reshape(group, block_q, dim)


def solution(q, k, v):
  batch, q_heads, seq, dim = q.shape
  kv_heads = k.shape[1]
  group = q_heads // kv_heads
  # A head block of size `group` at block index g covers exactly the query
  # heads g*group .. g*group+group-1, i.e. those that read kv head g.
  q_spec = pl.BlockSpec((None, group, BLOCK_Q, dim),
                        lambda b, g, i: (b, g, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, g, i: (b, g, 0, 0))
  return pl.pallas_call(
      _gqa_causal_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, kv_heads, seq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

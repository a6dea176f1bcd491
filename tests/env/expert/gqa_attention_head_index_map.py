# task: level3/gqa_attention
# Source: grouped-query attention by index map, as in the GQA variants of
# jax/experimental/pallas/ops/gpu/decode_attention.py (gqa: query heads of
# one group read the same kv block; JAX authors, Apache-2.0): the kv
# BlockSpec maps query head h to kv head h // group.
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _gqa_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k: int):
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))

  def body(j, carry):
    m, l, acc = carry
    ks = pl.ds(pl.multiple_of(j * block_k, block_k), block_k)
    s = jnp.dot(q, k_ref[ks, :].T, preferred_element_type=jnp.float32)
    m_new = jnp.maximum(m, s.max(axis=-1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    acc = acc * alpha[:, None] + jnp.dot(p, v_ref[ks, :],
                                         preferred_element_type=jnp.float32)
    return m_new, l * alpha + p.sum(axis=-1), acc

  rows, dim = q_ref.shape
  init = (jnp.full((rows,), -jnp.inf, jnp.float32),
          jnp.zeros((rows,), jnp.float32), jnp.zeros((rows, dim), jnp.float32))
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // block_k, body, init)
  o_ref[...] = acc / l[:, None]


def kernel(q, k, v):
  batch, q_heads, seq, dim = q.shape
  group = q_heads // k.shape[1]
  block_q = 64
  q_spec = pl.BlockSpec((None, None, block_q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim),
                         lambda b, h, i: (b, h // group, 0, 0))
  return pl.pallas_call(
      functools.partial(_gqa_kernel, block_k=64),
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, q_heads, seq // block_q),
      in_specs=[q_spec, kv_spec, kv_spec], out_specs=q_spec,
  )(q, k, v)

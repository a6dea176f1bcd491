# task: level3/attention
# expect: compute_outside_kernel
# Source: adapted from jax/experimental/pallas/ops/gpu/decode_attention.py
# (attn_forward_kernel and decode_attn_unbatched's split-k; JAX authors,
# Apache-2.0): each program attends to one of k_splits key chunks and
# returns its unnormalised output with the running max and denominator;
# the "final round of flash" that combines the splits runs in plain jnp
# outside pallas_call, as upstream does. That combine is real compute (exp,
# max, sum, divide), so the environment must say compute_outside_kernel.
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def split_kernel(q_ref, k_ref, v_ref, o_ref, l_ref, m_ref, *, block_k: int,
                 sm_scale: float):
  block_q, dim = q_ref.shape
  q = q_ref[...] * sm_scale

  def body(start_k, carry):
    o_prev, m_prev, l_prev = carry
    ks = pl.ds(start_k * block_k, block_k)
    qk = plgpu.dot(q, k_ref[ks, :].T)
    m_next = jnp.maximum(m_prev, qk.max(axis=-1))
    correction = jnp.exp(m_prev - m_next)
    s_curr = jnp.exp(qk - m_next[:, None])
    return (correction[:, None] * o_prev + plgpu.dot(s_curr, v_ref[ks, :]),
            m_next, correction * l_prev + s_curr.sum(axis=-1))

  init = (jnp.zeros((block_q, dim), jnp.float32),
          jnp.zeros(block_q, jnp.float32) + jnp.finfo(jnp.float32).min,
          jnp.zeros(block_q, jnp.float32))
  o, m, l = jax.lax.fori_loop(0, k_ref.shape[0] // block_k, body, init)
  o_ref[...], l_ref[...], m_ref[...] = o, l, m


def kernel(q, k, v, k_splits: int = 4):
  batch, heads, seq, dim = q.shape
  split = seq // k_splits
  block_q = 64
  k = k.reshape(batch, heads, k_splits, split, dim)
  v = v.reshape(batch, heads, k_splits, split, dim)
  o, l, m = pl.pallas_call(
      functools.partial(split_kernel, block_k=32,
                        sm_scale=1.0 / math.sqrt(dim)),
      grid=(batch, heads, seq // block_q, k_splits),
      in_specs=[
          pl.BlockSpec((None, None, block_q, dim),
                       lambda b, h, i, s: (b, h, i, 0)),
          pl.BlockSpec((None, None, None, split, dim),
                       lambda b, h, i, s: (b, h, s, 0, 0)),
          pl.BlockSpec((None, None, None, split, dim),
                       lambda b, h, i, s: (b, h, s, 0, 0)),
      ],
      out_specs=[
          pl.BlockSpec((None, None, None, block_q, dim),
                       lambda b, h, i, s: (b, h, s, i, 0)),
          pl.BlockSpec((None, None, None, block_q),
                       lambda b, h, i, s: (b, h, s, i)),
          pl.BlockSpec((None, None, None, block_q),
                       lambda b, h, i, s: (b, h, s, i)),
      ],
      out_shape=[
          jax.ShapeDtypeStruct((batch, heads, k_splits, seq, dim), q.dtype),
          jax.ShapeDtypeStruct((batch, heads, k_splits, seq), jnp.float32),
          jax.ShapeDtypeStruct((batch, heads, k_splits, seq), jnp.float32),
      ],
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(q, k, v)
  # Final round of flash (upstream decode_attention), outside the kernel.
  m_next = m.max(axis=2, keepdims=True)
  correction = jnp.exp(m - m_next)
  l = jnp.sum(l * correction, axis=2)
  o = jnp.sum(o * correction[..., None], axis=2)
  return o / l[..., None]

# task: level3/padded_attention
# Source: key-padding attention in the style of jax/experimental/pallas/ops/
# gpu/decode_attention.py (kv_seq_len_ref bounding the loop and masking the
# scores with 0.7 * finfo(float32).min; JAX authors, Apache-2.0): the batch
# entry's length arrives as a one-element block, the key loop stops at
# pl.cdiv(length, block_k).
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def padded_kernel(len_ref, q_ref, k_ref, v_ref, o_ref, *, block_k: int):
  length = len_ref[0]
  block_q, dim = q_ref.shape
  q = q_ref[...] * (1.0 / math.sqrt(dim))
  mask_indices = jnp.arange(block_k)

  def body(start_k, carry):
    o_prev, m_prev, l_prev = carry
    ks = pl.ds(start_k * block_k, block_k)
    qk = plgpu.dot(q, k_ref[ks, :].T)
    mask = (start_k * block_k + mask_indices < length)[None, :]
    qk += (~mask) * (0.7 * jnp.finfo(qk.dtype).min)
    m_next = jnp.maximum(m_prev, qk.max(axis=-1))
    correction = jnp.exp(m_prev - m_next)
    s_curr = jnp.exp(qk - m_next[:, None])
    o_next = correction[:, None] * o_prev + plgpu.dot(s_curr, v_ref[ks, :])
    return o_next, m_next, correction * l_prev + s_curr.sum(axis=-1)

  init = (jnp.zeros((block_q, dim), jnp.float32),
          jnp.zeros(block_q, jnp.float32) + jnp.finfo(jnp.float32).min,
          jnp.zeros(block_q, jnp.float32))
  o, _, l = jax.lax.fori_loop(0, pl.cdiv(length, block_k), body, init)
  o_ref[...] = (o / l[:, None]).astype(o_ref.dtype)


def kernel(q, k, v, lengths):
  batch, heads, seq, dim = q.shape
  block_q = 128
  q_spec = pl.BlockSpec((None, None, block_q, dim), lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      functools.partial(padded_kernel, block_k=64),
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // block_q),
      in_specs=[pl.BlockSpec((1,), lambda b, h, i: (b,)), q_spec, kv_spec,
                kv_spec],
      out_specs=q_spec,
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(lengths, q, k, v)

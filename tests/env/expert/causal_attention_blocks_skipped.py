# task: level3/causal_attention
# Source: the causal loop bound of jax/experimental/pallas/ops/gpu/
# attention.py (lax.div(block_q * (start_q + 1) + block_k - 1, block_k);
# JAX authors, Apache-2.0) in a natural-exp flash kernel over the task's
# [batch, heads, seq, dim] layout (squeezed batch/head block dims).
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def causal_flash_kernel(q_ref, k_ref, v_ref, o_ref, *, block_q: int,
                        block_k: int, sm_scale: float):
  start_q = pl.program_id(2)
  q = q_ref[...] * sm_scale
  span_q = start_q * block_q + jnp.arange(block_q)

  def body(start_k, carry):
    acc, m_prev, l_prev = carry
    ks = pl.ds(start_k * block_k, block_k)
    s = plgpu.dot(q, k_ref[ks, :].T)
    span_k = start_k * block_k + jnp.arange(block_k)
    s = jnp.where(span_q[:, None] >= span_k[None, :], s, -jnp.inf)
    m_next = jnp.maximum(m_prev, jnp.max(s, axis=-1))
    p = jnp.exp(s - m_next[:, None])
    alpha = jnp.exp(m_prev - m_next)
    acc = acc * alpha[:, None] + plgpu.dot(p, v_ref[ks, :])
    return acc, m_next, l_prev * alpha + p.sum(axis=-1)

  dim = q_ref.shape[-1]
  init = (jnp.zeros((block_q, dim), jnp.float32),
          jnp.full((block_q,), -jnp.inf, jnp.float32),
          jnp.zeros((block_q,), jnp.float32))
  upper_bound = lax.div(block_q * (start_q + 1) + block_k - 1, block_k)
  acc, _, l = lax.fori_loop(0, upper_bound, body, init)
  o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def kernel(q, k, v):
  batch, heads, seq, dim = q.shape
  block_q = block_k = 64
  q_spec = pl.BlockSpec((None, None, block_q, dim), lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      functools.partial(causal_flash_kernel, block_q=block_q, block_k=block_k,
                        sm_scale=1.0 / math.sqrt(dim)),
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, pl.cdiv(seq, block_q)),
      in_specs=[q_spec, kv_spec, kv_spec], out_specs=q_spec,
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(q, k, v)

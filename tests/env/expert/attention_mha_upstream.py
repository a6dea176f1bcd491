# task: level3/attention
# Source: adapted from jax/experimental/pallas/ops/gpu/attention.py
# (BlockSizes, DEFAULT_MASK_VALUE, segment_mask, mha_forward_kernel and
# mha; JAX authors, Apache-2.0). Kept: the frozen/slots BlockSizes with its
# classmethod default, the exp2 online softmax, masked plgpu.load/store of a
# padded head dim, plgpu.dot, the jitted entry with static arguments.
# Adapted: no backward pass or residuals; the task's [batch, heads, seq,
# dim] layout is transposed to upstream's [batch, seq, heads, dim] and back.
from __future__ import annotations

import functools
import math
from typing import Any

import jax
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
import jax.numpy as jnp
import numpy as np
import dataclasses

DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max)


@dataclasses.dataclass(frozen=True, slots=True)
class BlockSizes:
  """Tile sizes parameterizing the attention kernel."""
  block_q: int
  block_k: int

  @classmethod
  def get_default(cls):
    return BlockSizes(block_q=128, block_k=128)


def segment_mask(q_segment_ids: jax.Array, kv_segment_ids: jax.Array):
  q_segment_ids = jnp.expand_dims(q_segment_ids, axis=-1)
  if kv_segment_ids.ndim == 1:
    kv_segment_ids = jnp.expand_dims(kv_segment_ids, axis=0)
  else:
    kv_segment_ids = jnp.expand_dims(kv_segment_ids, axis=1)
  return jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)


def mha_forward_kernel(
    q_ref, k_ref, v_ref,  # Input arrays
    segment_ids_ref: jax.Array | None,  # segment_id arrays
    o_ref: Any,  # Output
    *, sm_scale: float, causal: bool, block_q: int, block_k: int,
    head_dim: int):
  seq_len = k_ref.shape[0]
  start_q = pl.program_id(0)
  head_dim_padded = q_ref.shape[-1]
  m_i = jnp.zeros(block_q, dtype=jnp.float32) - float('inf')
  l_i = jnp.zeros(block_q, dtype=jnp.float32)
  o = jnp.zeros((block_q, head_dim_padded), dtype=jnp.float32)
  curr_q_slice = pl.dslice(start_q * block_q, block_q)
  head_mask = (jnp.arange(head_dim_padded) < head_dim)[None, :]
  q = plgpu.load(q_ref, mask=head_mask, other=0.0)
  q_segment_ids = (
      None if segment_ids_ref is None else segment_ids_ref[curr_q_slice])

  def body(start_k, carry):
    o_prev, m_prev, l_prev = carry
    curr_k_slice = pl.dslice(start_k * block_k, block_k)
    k = plgpu.load(k_ref.at[curr_k_slice, :], mask=head_mask, other=0.0)
    qk = plgpu.dot(q, k.T)
    # Scale logits to convert from base-2 to the natural log domain.
    qk_scale = math.log2(math.e)
    if sm_scale != 1.:
      qk_scale *= sm_scale
    qk *= qk_scale
    if causal or segment_ids_ref is not None:
      mask = None
      if segment_ids_ref is not None:
        kv_segment_ids = segment_ids_ref[curr_k_slice]
        mask = segment_mask(q_segment_ids, kv_segment_ids)
      if causal:
        span_q = start_q * block_q + jnp.arange(block_q)
        span_k = start_k * block_k + jnp.arange(block_k)
        causal_mask = span_q[:, None] >= span_k[None, :]
        mask = (causal_mask if mask is None
                else jnp.logical_and(mask, causal_mask))
      qk = jnp.where(mask, qk, DEFAULT_MASK_VALUE)
    m_curr = jnp.max(qk, axis=-1)
    m_next = jnp.maximum(m_prev, m_curr)
    correction = jnp.exp2(m_prev - m_next)
    l_prev_corr = correction * l_prev
    s_curr = jnp.exp2(qk - m_next[:, None])
    l_curr = s_curr.sum(axis=-1)
    l_next = l_prev_corr + l_curr
    o_prev_corr = correction[:, None] * o_prev
    v = plgpu.load(v_ref.at[curr_k_slice, :], mask=head_mask)
    o_curr = plgpu.dot(s_curr.astype(v.dtype), v)
    return o_prev_corr + o_curr, m_next, l_next

  if causal:
    upper_bound = lax.div(block_q * (start_q + 1) + block_k - 1, block_k)
  else:
    upper_bound = pl.cdiv(seq_len, block_k)
  o, m_i, l_i = lax.fori_loop(0, upper_bound, body, (o, m_i, l_i))
  o /= l_i[:, None]
  plgpu.store(o_ref.at[:, : o.shape[-1]], o.astype(o_ref.dtype),
              mask=head_mask)


@functools.partial(
    jax.jit,
    static_argnames=["sm_scale", "causal", "block_sizes", "num_warps",
                     "num_stages"])
def mha(q, k, v, segment_ids: jnp.ndarray | None, sm_scale: float = 1.0,
        causal: bool = False,
        block_sizes: BlockSizes = BlockSizes.get_default(),
        num_warps: int | None = None, num_stages: int = 2):
  batch_size, q_seq_len, num_heads, head_dim = q.shape
  kv_seq_len = k.shape[1]
  block_q = min(block_sizes.block_q, q_seq_len)
  block_k = min(block_sizes.block_k, kv_seq_len)
  head_dim_padded = pl.next_power_of_2(head_dim)
  if q_seq_len % block_q != 0:
    raise ValueError(f"{q_seq_len=} must be a multiple of {block_q=}")
  grid_ = (pl.cdiv(q_seq_len, block_q), batch_size, num_heads)
  num_warps_ = num_warps if num_warps is not None else (
      4 if head_dim <= 64 else 8)
  kernel = functools.partial(mha_forward_kernel, sm_scale=sm_scale,
                             block_q=block_q, block_k=block_k,
                             head_dim=head_dim, causal=causal)
  in_specs = [
      pl.BlockSpec((None, block_q, None, head_dim_padded),
                   lambda i, j, k: (j, i, k, 0)),
      pl.BlockSpec((None, kv_seq_len, None, head_dim_padded),
                   lambda _, j, k: (j, 0, k, 0)),
      pl.BlockSpec((None, kv_seq_len, None, head_dim_padded),
                   lambda _, j, k: (j, 0, k, 0)),
  ]
  in_specs.append(None if segment_ids is None else pl.BlockSpec(
      (None, kv_seq_len), lambda _, j, k: (j, 0)))
  return pl.pallas_call(
      kernel,
      grid=grid_,
      in_specs=in_specs,
      out_specs=pl.BlockSpec((None, block_q, None, head_dim_padded),
                             lambda i, j, k: (j, i, k, 0)),
      compiler_params=plgpu.CompilerParams(num_warps=num_warps_,
                                           num_stages=num_stages),
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      name="mha_forward",
  )(q, k, v, segment_ids)


def kernel(q, k, v):
  to_bshd = lambda x: jnp.transpose(x, (0, 2, 1, 3))
  out = mha(to_bshd(q), to_bshd(k), to_bshd(v), None,
            sm_scale=1.0 / math.sqrt(q.shape[-1]))
  return to_bshd(out)

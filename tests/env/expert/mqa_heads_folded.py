# task: level3/mqa_attention
# Source: the multi-query trick of decode kernels (e.g. jax/experimental/
# pallas/ops/gpu/decode_attention.py's gqa path, which stacks the query
# heads sharing one kv head into the rows of one q block; JAX authors,
# Apache-2.0): with a single kv head, all heads' queries become one [H*S, D]
# query matrix per batch entry, tiled by a (batch, row block) grid.
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BLOCK_ROWS, BLOCK_K = 128, 64


def _mqa_kernel(q_ref, k_ref, v_ref, o_ref):
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))

  def body(j, carry):
    m, l, acc = carry
    ks = pl.ds(j * BLOCK_K, BLOCK_K)
    s = plgpu.dot(q, k_ref[ks, :], trans_b=True)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    return (m_new, l * alpha + jnp.sum(p, axis=1),
            acc * alpha[:, None] + plgpu.dot(p, v_ref[ks, :]))

  init = (jnp.full((BLOCK_ROWS,), -jnp.inf, jnp.float32),
          jnp.zeros((BLOCK_ROWS,), jnp.float32),
          jnp.zeros((BLOCK_ROWS, q_ref.shape[-1]), jnp.float32))
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // BLOCK_K, body, init)
  o_ref[...] = acc / l[:, None]


def kernel(q, k, v):
  batch, heads, seq, dim = q.shape
  rows = q.reshape(batch, heads * seq, dim)
  out = pl.pallas_call(
      _mqa_kernel,
      out_shape=jax.ShapeDtypeStruct(rows.shape, q.dtype),
      grid=(batch, pl.cdiv(heads * seq, BLOCK_ROWS)),
      in_specs=[pl.BlockSpec((None, BLOCK_ROWS, dim), lambda b, i: (b, i, 0)),
                pl.BlockSpec((None, None, seq, dim), lambda b, i: (b, 0, 0, 0)),
                pl.BlockSpec((None, None, seq, dim), lambda b, i: (b, 0, 0, 0))],
      out_specs=pl.BlockSpec((None, BLOCK_ROWS, dim), lambda b, i: (b, i, 0)),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(rows, k, v)
  return out.reshape(q.shape)

# task: level2/causal_softmax
# Source: the masking of jax/experimental/pallas/ops/gpu/attention.py
# (DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max),
# causal spans from pl.program_id; JAX authors, Apache-2.0) on a plain
# scaled softmax: masked logits get a large finite negative, then zero.
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max)
BLOCK_Q = 64
SCALE = 0.125


def _causal_softmax_kernel(s_ref, o_ref):
  start_q = pl.program_id(1)
  s = s_ref[...] * SCALE
  span_q = start_q * BLOCK_Q + jnp.arange(BLOCK_Q)
  span_k = jnp.arange(s.shape[-1])
  causal_mask = span_q[:, None] >= span_k[None, :]
  s = jnp.where(causal_mask, s, DEFAULT_MASK_VALUE)
  e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
  e = jnp.where(causal_mask, e, 0.0)
  o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def kernel(scores):
  heads, q_len, k_len = scores.shape
  spec = pl.BlockSpec((None, BLOCK_Q, k_len), lambda h, i: (h, i, 0))
  return pl.pallas_call(
      _causal_softmax_kernel,
      out_shape=jax.ShapeDtypeStruct(scores.shape, scores.dtype),
      grid=(heads, q_len // BLOCK_Q), in_specs=[spec], out_specs=spec,
  )(scores)

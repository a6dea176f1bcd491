"""level2/attention_scores: softmax(q @ k.T / sqrt(d)) per head."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Attention probabilities. Inputs: q float32 [4, 256, 64], k float32
[4, 256, 64] ([heads, seq, head_dim]). Output: float32 [4, 256, 256], for
each head h: out[h] = softmax(q[h] @ k[h].T / sqrt(64), axis=-1)."""
ATOL = 2e-3
RTOL = _blocks.DOT_RTOL
H, S, D = 4, 256, 64
BLOCK_Q = 64


def make_inputs(key):
  qk = ((H, S, D), math.sqrt(2.5))
  return _blocks.normals(key, qk, qk)


def reference(q, k):
  s = jnp.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
  return jax.nn.softmax(s, axis=-1)


def _attention_scores_kernel(q_ref, k_ref, o_ref):
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))
  s = jax.lax.dot_general(q, k_ref[...], (((1,), (1,)), ((), ())),
                          preferred_element_type=jnp.float32)
  e = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)


def solution(q, k):
  h, s, d = q.shape
  return pl.pallas_call(
      _attention_scores_kernel,
      out_shape=jax.ShapeDtypeStruct((h, s, s), jnp.float32),
      grid=(h, s // BLOCK_Q),
      in_specs=[pl.BlockSpec((None, BLOCK_Q, d), lambda i, j: (i, j, 0)),
                pl.BlockSpec((None, s, d), lambda i, j: (i, 0, 0))],
      out_specs=pl.BlockSpec((None, BLOCK_Q, s), lambda i, j: (i, j, 0)),
  )(q, k)

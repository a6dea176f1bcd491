"""level2/causal_softmax: scale, causal mask and softmax of score matrices."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Scaled, causally masked softmax of attention scores. Input scores float32
[8, 256, 256] ([heads, query, key]). Output: float32 [8, 256, 256], for each
head h: s = scores[h] * 0.125 with s[i, j] = -inf wherever j > i, then
out[h, i, j] = exp(s[i, j]) / sum_k exp(s[i, k]) (so out[h, i, j] = 0 for
j > i)."""
ATOL = 1e-6
RTOL = 1e-5
H, S = 8, 256
SCALE = 0.125
BLOCK_Q = 64


def make_inputs(key):
  return _blocks.normals(key, ((H, S, S), 16.0))


def reference(scores):
  s = scores * SCALE
  causal = jnp.arange(S)[None, :] <= jnp.arange(S)[:, None]
  return jax.nn.softmax(jnp.where(causal, s, -jnp.inf), axis=-1)


def _causal_softmax_kernel(s_ref, o_ref):
  # Rows of this block are queries q0 .. q0 + BLOCK_Q - 1.
  q0 = pl.program_id(1) * BLOCK_Q
  s = s_ref[...] * SCALE
  rows = q0 + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
  cols = jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
  s = jnp.where(cols <= rows, s, -jnp.inf)  # the diagonal keeps rows finite
  e = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)


def solution(scores):
  h, s, _ = scores.shape
  spec = pl.BlockSpec((None, BLOCK_Q, s), lambda i, j: (i, j, 0))
  return pl.pallas_call(
      _causal_softmax_kernel,
      out_shape=jax.ShapeDtypeStruct(scores.shape, scores.dtype),
      grid=(h, s // BLOCK_Q),
      in_specs=[spec],
      out_specs=spec,
  )(scores)

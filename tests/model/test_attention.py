"""Whole-sequence attention: dot against numpy, the others against dot."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from leap_jax.model import attention

RNG = np.random.RandomState(0)


def _inputs(b, l, kv, r, h, seed=0, pad_rows=()):
  rng = np.random.RandomState(seed)
  q = 0.3 * rng.randn(b, l, kv, r, h).astype(np.float32)
  k = rng.randn(b, l, kv, h).astype(np.float32)
  v = rng.randn(b, l, kv, h).astype(np.float32)
  valid = np.ones((b, l), bool)
  for row, count in pad_rows:
    valid[row, :count] = False  # left padding, as the sampler pads prompts
  return q, k, v, valid


def test_dot_is_grouped_causal_masked_softmax():
  q, keys, values, valid = _inputs(2, 5, 2, 3, 4, pad_rows=[(1, 2)])
  out = np.asarray(attention.causal(q, keys, values, valid, 'dot'))
  for bi, ti, ki, ri in np.ndindex(2, 5, 2, 3):
    if not valid[bi, ti]:
      continue  # a padding query: no key to see, the output is unused
    s = keys[bi, :, ki] @ q[bi, ti, ki, ri]
    s = np.where(valid[bi] & (np.arange(5) <= ti), s, -np.inf)
    p = np.exp(s - s.max())
    p /= p.sum()
    np.testing.assert_allclose(out[bi, ti, ki, ri], p @ values[bi, :, ki],
                               rtol=1e-4, atol=1e-5)


def _loss(impl, valid, weights, block=attention.DEFAULT_BLOCK):
  rows = jnp.asarray(valid)[:, :, None, None, None]

  def loss(q, k, v):
    out = attention.causal(q, k, v, None if valid.all() else valid, impl,
                           block)
    return jnp.sum(jnp.where(rows, out * weights, 0.0))

  return loss


def _max_diffs(impl, q, k, v, valid, block=attention.DEFAULT_BLOCK):
  """Max |out - dot's| over valid rows, and the same for dq, dk, dv."""
  weights = np.random.RandomState(1).randn(*q.shape).astype(np.float32)
  padded = None if valid.all() else valid
  ref = attention.causal(q, k, v, padded, 'dot')
  out = attention.causal(q, k, v, padded, impl, block)
  diffs = [float(np.abs(np.asarray(out - ref))[valid].max())]
  g_ref = jax.grad(_loss('dot', valid, weights), argnums=(0, 1, 2))(q, k, v)
  g = jax.grad(_loss(impl, valid, weights, block), argnums=(0, 1, 2))(q, k, v)
  diffs += [float(np.abs(np.asarray(a - b)).max()) for a, b in zip(g, g_ref)]
  return diffs


@settings(max_examples=12, deadline=None)
@given(length=st.integers(1, 40), block=st.sampled_from([4, 8, 16, 64]),
       pad=st.integers(0, 6), kv=st.sampled_from([1, 2]),
       r=st.sampled_from([1, 3]))
def test_chunked_matches_dot_with_gradients(length, block, pad, kv, r):
  """Blocks that do and do not divide the length, left padding, GQA."""
  pad = min(pad, length - 1)
  q, k, v, valid = _inputs(2, length, kv, r, 8, seed=length,
                           pad_rows=[(1, pad)])
  diffs = _max_diffs('chunked', q, k, v, valid, block)
  assert max(diffs) <= 1e-5, diffs


def test_chunked_bf16_stays_close_to_dot():
  q, k, v, _ = _inputs(1, 48, 2, 2, 16)
  as16 = lambda x: jnp.asarray(x, jnp.bfloat16)
  ref = attention.causal(as16(q), as16(k), as16(v), None, 'dot')
  out = attention.causal(as16(q), as16(k), as16(v), None, 'chunked', 16)
  assert out.dtype == jnp.bfloat16
  assert float(jnp.abs(out.astype(jnp.float32) - ref).max()) < 2e-2


def test_chunked_never_materialises_a_score_matrix():
  """The compiled program holds no [L, S]-sized buffer: its temporaries
  stay far below one f32 score matrix per head."""
  b, l, kv, r, h = 1, 2048, 1, 2, 16
  q = jax.ShapeDtypeStruct((b, l, kv, r, h), jnp.float32)
  k = jax.ShapeDtypeStruct((b, l, kv, h), jnp.float32)
  valid = jax.ShapeDtypeStruct((b, l), jnp.bool_)

  def temp_bytes(impl):
    def loss(q, k, v, valid):
      return jnp.sum(attention.causal(q, k, v, valid, impl, 256))
    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    return grad.lower(q, k, k, valid).compile().memory_analysis(
    ).temp_size_in_bytes

  scores = b * kv * r * l * l * 4
  assert temp_bytes('dot') >= scores
  assert temp_bytes('chunked') < scores / 8


def test_cudnn_call_lays_out_grouped_heads_as_dot_does():
  """On CPU jax.nn.dot_product_attention runs XLA's version of the same
  call: the layout (GQA heads, causal, scale 1) is what is checked."""
  q, k, v, _ = _inputs(2, 9, 2, 3, 8)
  ref = attention.causal(q, k, v, None, 'dot')
  out = attention.cudnn(q, k, v, implementation=None)
  np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-5)
  with pytest.raises(ValueError, match='padding'):
    attention.causal(q, k, v, np.ones((2, 9), bool), 'cudnn')


def test_auto_resolves_per_platform():
  bf16 = jnp.bfloat16
  assert attention.resolve('auto', bf16, 128, False, 'cpu') == 'chunked'
  assert attention.resolve('auto', bf16, 128, False, 'tpu') == 'chunked'
  assert attention.resolve('auto', bf16, 128, False, 'gpu') == 'cudnn'
  # Key padding (prefill) or f32: the Pallas kernel; odd head_dim: jnp.
  assert attention.resolve('auto', bf16, 128, True, 'gpu') == 'pallas'
  assert attention.resolve('auto', jnp.float32, 64, False, 'gpu') == 'pallas'
  assert attention.resolve('auto', bf16, 24, True, 'gpu') == 'chunked'
  assert attention.resolve('dot', bf16, 24, True, 'gpu') == 'dot'
  with pytest.raises(ValueError, match='attention must be one of'):
    attention.resolve('flash', bf16, 24, True, 'gpu')


def test_causal_needs_a_whole_sequence():
  q, k, v, _ = _inputs(1, 4, 1, 1, 4)
  with pytest.raises(ValueError, match='as many keys'):
    attention.causal(q, k[:, :3], v[:, :3], None, 'chunked')

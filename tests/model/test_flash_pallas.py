"""The Pallas flash-attention kernels: interpret mode against dot (values and
gradients), and lowering for the GPU's Triton backend (no GPU needed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.model import attention, flash_pallas


def _inputs(b, l, kv, r, h, pad):
  rng = np.random.RandomState(l)
  q = jnp.asarray(0.3 * rng.randn(b, l, kv, r, h), jnp.float32)
  k = jnp.asarray(rng.randn(b, l, kv, h), jnp.float32)
  v = jnp.asarray(rng.randn(b, l, kv, h), jnp.float32)
  valid = np.ones((b, l), bool)
  valid[-1, :pad] = False
  return q, k, v, jnp.asarray(valid)


# 37: one padded block; 160: several forward and backward blocks.
@pytest.mark.parametrize('length,kv,r', [(37, 2, 3), (160, 1, 2)])
def test_interpret_matches_dot_with_gradients(length, kv, r):
  q, k, v, valid = _inputs(2, length, kv, r, 16, pad=5)
  weights = jnp.asarray(np.random.RandomState(1).randn(*q.shape), jnp.float32)
  rows = valid[:, :, None, None, None]

  def loss(fn):
    return lambda q, k, v: jnp.sum(jnp.where(rows, fn(q, k, v) * weights, 0.0))

  ref = lambda q, k, v: attention.causal(q, k, v, valid, 'dot')
  ours = lambda q, k, v: flash_pallas.attention(q, k, v, valid, interpret=True)
  diff = np.abs(np.asarray(ours(q, k, v) - ref(q, k, v)))[np.asarray(valid)]
  assert diff.max() <= 1e-5
  grads = jax.grad(loss(ours), argnums=(0, 1, 2))(q, k, v)
  grads_ref = jax.grad(loss(ref), argnums=(0, 1, 2))(q, k, v)
  for g, g_ref in zip(grads, grads_ref):
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=1e-5)


def test_lowers_for_triton_forward_and_backward():
  q = jax.ShapeDtypeStruct((2, 256, 2, 4, 64), jnp.bfloat16)
  k = jax.ShapeDtypeStruct((2, 256, 2, 64), jnp.bfloat16)
  valid = jax.ShapeDtypeStruct((2, 256), jnp.bool_)

  def loss(q, k, v, valid):
    out = flash_pallas.attention(q, k, v, valid, interpret=False)
    return jnp.sum(out.astype(jnp.float32))

  grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
  text = grad.trace(q, k, k, valid).lower(
      lowering_platforms=('cuda',)).as_text()
  # The forward (its residuals) and the fused backward: two Triton calls.
  assert text.count('__gpu$xla.gpu.triton') == 2, text[:2000]


def test_needs_a_power_of_two_head_dim():
  q, k, v, valid = _inputs(1, 8, 1, 1, 16, pad=0)
  with pytest.raises(ValueError, match='power-of-two'):
    flash_pallas.attention(q[..., :12], k[..., :12], v[..., :12], valid)

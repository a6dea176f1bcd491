"""Chunked token logprobs against log_softmax of the whole logits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from leap_jax.model import logprobs


def _reference(x, w, targets, temperature, transposed):
  logits = (x @ (w.T if transposed else w)) / temperature
  logp = jax.nn.log_softmax(logits, axis=-1)
  return jnp.take_along_axis(logp, targets[..., None], -1)[..., 0]


@settings(max_examples=10, deadline=None)
@given(length=st.integers(1, 30), chunk=st.sampled_from([1, 4, 7, 64]),
       transposed=st.booleans(), temperature=st.sampled_from([0.5, 1.0]))
def test_matches_full_logits_values_and_gradients(length, chunk, transposed,
                                                  temperature):
  rng = np.random.RandomState(length)
  d, v = 8, 40
  x = jnp.asarray(rng.randn(2, length, d), jnp.float32)
  w = jnp.asarray(rng.randn(*((v, d) if transposed else (d, v))), jnp.float32)
  targets = jnp.asarray(rng.randint(0, v, (2, length)))
  g = jnp.asarray(rng.randn(2, length), jnp.float32)
  ours = lambda x, w: logprobs.token_logprobs(x, w, targets, temperature,
                                              chunk, transposed)
  ref = lambda x, w: _reference(x, w, targets, temperature, transposed)
  np.testing.assert_allclose(np.asarray(ours(x, w)), np.asarray(ref(x, w)),
                             atol=1e-5)
  grad = lambda fn: jax.grad(lambda x, w: jnp.sum(fn(x, w) * g),
                             argnums=(0, 1))(x, w)
  for a, b in zip(grad(ours), grad(ref)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)


@pytest.mark.parametrize('transposed', [False, True])
def test_backward_never_holds_the_whole_logits(transposed):
  """The compiled gradient's temporaries stay well under one [B, L, V] f32
  array, which plain autodiff of the full logits needs several of."""
  b, l, d, v = 2, 1024, 16, 4096
  x = jax.ShapeDtypeStruct((b, l, d), jnp.float32)
  w = jax.ShapeDtypeStruct((v, d) if transposed else (d, v), jnp.float32)
  t = jax.ShapeDtypeStruct((b, l), jnp.int32)

  def temp_bytes(fn):
    grad = jax.jit(jax.grad(lambda x, w, t: jnp.sum(fn(x, w, t)),
                            argnums=(0, 1)))
    return grad.lower(x, w, t).compile().memory_analysis().temp_size_in_bytes

  full = b * l * v * 4
  chunked = temp_bytes(lambda x, w, t: logprobs.token_logprobs(
      x, w, t, 1.0, 128, transposed))
  whole = temp_bytes(lambda x, w, t: _reference(x, w, t, 1.0, transposed))
  assert whole >= full
  assert chunked < full / 2, (chunked, full)

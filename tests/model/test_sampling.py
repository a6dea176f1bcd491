"""Token choice: greedy, top-k, top-p and the inverse-CDF draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.model import sampling


def _sort_top_p_keep(probs, top_p):
  """Reference: the minimal top set with mass >= top_p, by sorting."""
  order = np.argsort(-probs)
  before = np.cumsum(probs[order]) - probs[order]
  keep = np.zeros_like(probs, bool)
  keep[order[before < top_p]] = True
  return keep


def test_top_p_threshold_matches_sorting():
  rng = np.random.RandomState(0)
  logits = rng.randn(6, 1000).astype(np.float32) * 3
  probs = np.asarray(jax.nn.softmax(logits, -1))
  for top_p in (0.1, 0.5, 0.9, 0.99):
    t = np.asarray(sampling.top_p_threshold(jnp.asarray(probs), top_p))
    np.testing.assert_array_equal(
        probs >= t, np.stack([_sort_top_p_keep(p, top_p) for p in probs]))


def test_inverse_cdf_follows_the_distribution():
  probs = np.zeros((1, 700), np.float32)
  probs[0, [3, 300, 699]] = [0.2, 0.5, 0.3]  # across CDF blocks
  draw = jax.jit(jax.vmap(lambda k: sampling.inverse_cdf(jnp.asarray(probs),
                                                         k)[0]))
  tokens = np.asarray(draw(jax.random.split(jax.random.key(0), 20000)))
  assert set(np.unique(tokens)) == {3, 300, 699}
  freq = [np.mean(tokens == i) for i in (3, 300, 699)]
  np.testing.assert_allclose(freq, [0.2, 0.5, 0.3], atol=0.015)


def test_modes():
  logits = jnp.asarray([[0.0, 3.0, 1.0, 2.0]] * 64)
  key = jax.random.key(0)
  greedy, lp = sampling.sample(logits, key, sampling.mode_for(0, 0, 1.0),
                               1.0, 1.0)
  assert (np.asarray(greedy) == 1).all()
  np.testing.assert_allclose(lp, jax.nn.log_softmax(logits[0])[1], rtol=1e-6)
  top2, lp = sampling.sample(logits, key, sampling.mode_for(2.0, 2, 1.0),
                             2.0, 1.0)
  assert set(np.asarray(top2).tolist()) == {1, 3}
  # Logprobs are under the temperature-scaled, untruncated distribution.
  np.testing.assert_allclose(
      lp, jax.nn.log_softmax(logits / 2.0)[0][np.asarray(top2)], rtol=1e-6)
  # p = .64, .24, .09, .03: mass .7 needs the top two tokens, .6 only one.
  for top_p, allowed in ((0.7, {1, 3}), (0.6, {1})):
    nucleus, _ = sampling.sample(logits, key,
                                 sampling.mode_for(1.0, 0, top_p), 1.0, top_p)
    assert set(np.asarray(nucleus).tolist()) == allowed


def test_mode_validation():
  assert sampling.mode_for(0.0, 0, 1.0).greedy
  assert sampling.mode_for(1.0, 5, 0.9) == sampling.Mode(False, 5, True)
  with pytest.raises(ValueError):
    sampling.mode_for(-1.0, 0, 1.0)
  with pytest.raises(ValueError):
    sampling.mode_for(1.0, 0, 0.0)

"""LEAP per-turn advantages, by hand."""

import chex
import jax
import numpy as np

from leap_jax.rl import advantages


def test_hand_cases():
  r_PG = np.array([[1.0, 1 / 3, -2 / 3, 0.0], [0.5, -1.0, 1.0, 0.0]])
  n_PG = np.array([[2, 1, 3, 3], [3, 1, 3, 1]])
  fn = jax.jit(advantages.leap_turn_advantages, static_argnums=(2, 3))
  a = fn(r_PG, n_PG, 3, 0.5)
  chex.assert_shape(a, (2, 4, 3))
  want = np.array([
      [[0.5, 1, 0], [1 / 3, 0, 0], [-2 / 3] * 3, [0, 0, 0]],
      [[0.125, 0.25, 0.5], [-1, 0, 0], [0.25, 0.5, 1], [0, 0, 0]]])
  np.testing.assert_allclose(a, want, atol=1e-6)


def test_single_turn_and_gamma_one():
  a = advantages.leap_turn_advantages(np.array([[1.0, -1.0]]),
                                      np.array([[1, 1]]), 1, 0.5)
  np.testing.assert_allclose(a, [[[1.0], [-1.0]]])
  a = advantages.leap_turn_advantages(np.array([[0.5]]), np.array([[3]]), 3,
                                      1.0)
  np.testing.assert_allclose(a, [[[0.5, 0.5, 0.5]]])


def test_weigh_negatives():
  adv = np.array([[[0.5, -1.0, 0.0]], [[-0.25, 2.0, -3.0]]])
  np.testing.assert_allclose(advantages.weigh_negatives(adv, 1.0), adv)
  np.testing.assert_allclose(advantages.weigh_negatives(adv, 0.0),
                             [[[0.5, 0, 0]], [[0, 2.0, 0]]])
  np.testing.assert_allclose(advantages.weigh_negatives(adv, 0.1),
                             [[[0.5, -0.1, 0]], [[-0.025, 2.0, -0.3]]],
                             rtol=1e-6)

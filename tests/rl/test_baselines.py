"""Baselines: single-turn GRPO and multi-turn full returns, by hand."""

import numpy as np

from leap_jax.rl import baselines


def test_grpo_single_turn():
  a = baselines.grpo_single_turn_advantages(
      np.array([[1, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]], bool))
  std = np.sqrt(0.25 * 0.75)
  np.testing.assert_allclose(
      a, [[0.75 / std, -0.25 / std, -0.25 / std, -0.25 / std], [0] * 4,
          [1, -1, 1, -1]], rtol=1e-4)


def test_turn_returns():
  ok = np.array([[[0, 0, 1], [0, 1, 0]]], bool)
  active = np.array([[[1, 1, 1], [1, 1, 0]]], bool)
  np.testing.assert_allclose(baselines.turn_returns(ok, active, 0.5),
                             [[[0.25, 0.5, 1], [0.5, 1, 0]]])


def test_multiturn_full_normalizes_over_group_turns():
  ok = np.array([[[0, 1, 0], [0, 0, 0]]], bool)
  active = np.array([[[1, 1, 0], [1, 1, 1]]], bool)
  # Returns on active turns: [.5, 1] and [0, 0, 0]: mean .3, std .4.
  a = baselines.multiturn_full_advantages(ok, active, 0.5)
  np.testing.assert_allclose(a, [[[0.5, 1.75, 0], [-0.75] * 3]], atol=1e-4)


def test_multiturn_full_hopeless_group_is_zero():
  ok = np.zeros((1, 2, 2), bool)
  active = np.ones((1, 2, 2), bool)
  np.testing.assert_allclose(baselines.multiturn_full_advantages(ok, active,
                                                                 0.5), 0)

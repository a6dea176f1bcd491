"""Baselines over per-turn rewards: group_norm and TRLOO, by hand."""

import numpy as np

from leap_jax.rl import baselines

ALL_1 = np.ones((3, 4, 1), bool)


def test_group_norm_single_turn_is_grpo():
  r = np.array([[1, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]], np.float32)
  a = baselines.group_norm(r[:, :, None], ALL_1)[:, :, 0]
  std = np.sqrt(0.25 * 0.75)
  np.testing.assert_allclose(
      a, [[0.75 / std, -0.25 / std, -0.25 / std, -0.25 / std], [0] * 4,
          [1, -1, 1, -1]], rtol=1e-4)


def test_group_norm_over_the_active_turns_of_the_group():
  # Returns on active turns: [.5, 1] and [0, 0, 0]: mean .3, std .4.
  r = np.array([[[0.5, 1, 7], [0, 0, 0]]], np.float32)
  active = np.array([[[1, 1, 0], [1, 1, 1]]], bool)
  np.testing.assert_allclose(baselines.group_norm(r, active),
                             [[[0.5, 1.75, 0], [-0.75] * 3]], atol=1e-4)


def test_group_norm_leaves_dropped_trajectories_out():
  # g2 (dropped) would pull the mean of [1, 0] down; without it: mean .5,
  # std .5 -> [1, -1], and g2 gets 0.
  r = np.array([[[1.0], [0.0], [0.0]]], np.float32)
  valid = np.array([[1, 1, 0]], bool)
  np.testing.assert_allclose(
      baselines.group_norm(r, np.ones((1, 3, 1), bool), valid),
      [[[1], [-1], [0]]], atol=1e-4)


def test_trloo_hand_computed_group():
  # One prompt, G = 4, T = 2. Turn 1 returns .5, 1, 0, 0 (all active):
  # leave-one-out means (1+0+0)/3, (.5+0+0)/3, 1.5/3, 1.5/3 ->
  # A = .5 - 1/3, 1 - 1/6, -.5, -.5. Turn 2 reached by g0 (R 1) and g2 (R 0)
  # only (g1 solved at turn 1, g3 was pruned): A = 1 - 0, 0 - 1.
  r = np.array([[[0.5, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]], np.float32)
  active = np.array([[[1, 1], [1, 0], [1, 1], [1, 0]]], bool)
  np.testing.assert_allclose(
      baselines.trloo(r, active),
      [[[0.5 - 1 / 3, 1.0], [1 - 1 / 6, 0], [-0.5, -1.0], [-0.5, 0]]],
      atol=1e-6)


def test_trloo_is_group_mean_scaled_by_g_over_g_minus_1_and_unnormalised():
  rs = np.random.RandomState(0)
  r = rs.normal(size=(3, 5, 1)).astype(np.float32) * 4.0
  a = np.asarray(baselines.trloo(r, np.ones((3, 5, 1), bool)))
  want = (r - r.mean(axis=1, keepdims=True)) * 5 / 4
  np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


def test_trloo_lone_sample_keeps_its_return_and_dropped_ones_count_not():
  # Turn 2 reached by g1 only: A = R (nobody to compare with). g2 dropped:
  # the turn-1 baseline of g0 is g1's return alone.
  r = np.array([[[1.0, 0.0], [0.0, 0.5], [1.0, 0.0]]], np.float32)
  active = np.array([[[1, 0], [1, 1], [1, 0]]], bool)
  valid = np.array([[1, 1, 0]], bool)
  np.testing.assert_allclose(baselines.trloo(r, active, valid),
                             [[[1, 0], [-1, 0.5], [0, 0]]], atol=1e-6)

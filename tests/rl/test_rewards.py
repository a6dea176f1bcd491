"""First-success turns and rank rewards: hand cases, ties, G = 2, T = 1."""

import chex
import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from leap_jax.rl import rewards


def test_first_success_turn():
  ok_PGT = np.array([[[0, 1, 0], [1, 0, 1], [0, 0, 0], [0, 0, 1]],
                     [[0, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]]], bool)
  active_PGT = np.array([[[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]],
                         [[1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]]], bool)
  k = rewards.first_success_turn(ok_PGT, active_PGT)
  chex.assert_shape(k, (2, 4))
  # p1 g0 is ok at turn 2, but that turn never ran (pruned): T + 1.
  np.testing.assert_array_equal(k, [[2, 1, 4, 3], [4, 1, 4, 4]])


def test_rank_rewards_middle_group():
  r = jax.jit(rewards.rank_rewards, static_argnums=1)(
      np.array([[1, 2, 4, 4]]), 3)
  np.testing.assert_allclose(r, [[1, 1 / 3, -2 / 3, -2 / 3]], atol=1e-6)


def test_rank_rewards_ties_easy_hopeless():
  k = np.array([[2, 2, 4, 4],    # tie at turn 2, two failures tie
                [1, 1, 1, 1],    # easy: all solved at once
                [4, 4, 4, 4]])   # hopeless
  np.testing.assert_allclose(
      rewards.rank_rewards(k, 3),
      [[2 / 3, 2 / 3, -2 / 3, -2 / 3], [0] * 4, [0] * 4], atol=1e-6)


def test_rank_rewards_group_of_two_and_single_turn():
  np.testing.assert_allclose(rewards.rank_rewards(np.array([[1, 3], [3, 3]]),
                                                  2), [[1, -1], [0, 0]])
  # T = 1: k in {1, 2}, success vs failure.
  np.testing.assert_allclose(rewards.rank_rewards(np.array([[1, 2, 2]]), 1),
                             [[1, -0.5, -0.5]])


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 4), st.integers(2, 8)),
                  elements=st.integers(1, 4)))
def test_rank_rewards_zero_sum_and_bounded(k_PG):
  r = np.asarray(rewards.rank_rewards(k_PG, 3))
  np.testing.assert_allclose(r.sum(axis=1), 0, atol=1e-5)
  assert (r >= -1 - 1e-6).all() and (r <= 1 + 1e-6).all()
  # Earlier success never gets less reward.
  for row_k, row_r in zip(k_PG, r):
    order = np.argsort(row_k, kind='stable')
    assert (np.diff(row_r[order]) <= 1e-6).all()


def test_speed_gate_ok():
  ok = np.array([[[1, 1, 0]]], bool)
  speed = np.array([[[1.5, 0.9, 3.0]]], np.float32)
  np.testing.assert_array_equal(rewards.speed_gate_ok(ok, speed, 1.2),
                                [[[1, 0, 0]]])
  nan = np.full((1, 1, 3), np.nan, np.float32)
  assert not np.asarray(rewards.speed_gate_ok(ok, nan, 1.0)).any()


def test_speed_tiebreak():
  k = np.array([[1, 1, 2, 4]])
  s = np.array([[2.0, 1.0, 3.0, np.nan]], np.float32)
  r = np.asarray(rewards.speed_tiebreak_rewards(k, s, 3, band=0.1))
  # g0 beats g1 on speed (same turn), and both beat g2 (later) and g3.
  np.testing.assert_allclose(r, [[1, 1 / 3, -1 / 3, -1]], atol=1e-6)
  # Inside the band the pair stays a tie: plain rank rewards.
  r_band = rewards.speed_tiebreak_rewards(k, np.array([[1.05, 1.0, 3, 1]]),
                                          3, band=0.1)
  np.testing.assert_allclose(r_band, rewards.rank_rewards(k, 3), atol=1e-6)
  # Two failures never compare speed.
  r_fail = rewards.speed_tiebreak_rewards(np.array([[4, 4]]),
                                          np.array([[2.0, 1.0]]), 3)
  np.testing.assert_allclose(r_fail, [[0, 0]])


def test_speedup_at_first_success():
  s = np.array([[[1.0, 2.0], [3.0, 4.0]]], np.float32)
  out = rewards.speedup_at_first_success(s, np.array([[2, 3]]))
  np.testing.assert_allclose(out, [[2.0, np.nan]])

"""Rewards: first-success turns, rank (hand cases, ties, G = 2, T = 1,
dropped members), binary, discounted returns, and the speed modes against
simulated timing noise."""

import math

import chex
import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from leap_jax.env import timing
from leap_jax.rl import rewards

NAN = np.nan


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
  r = jax.jit(rewards.rank_rewards)(np.array([[1, 2, 4, 4]]))
  np.testing.assert_allclose(r, [[1, 1 / 3, -2 / 3, -2 / 3]], atol=1e-6)


def test_rank_rewards_ties_easy_hopeless():
  k = np.array([[2, 2, 4, 4],    # tie at turn 2, two failures tie
                [1, 1, 1, 1],    # easy: all solved at once
                [4, 4, 4, 4]])   # hopeless
  np.testing.assert_allclose(
      rewards.rank_rewards(k),
      [[2 / 3, 2 / 3, -2 / 3, -2 / 3], [0] * 4, [0] * 4], atol=1e-6)


def test_rank_rewards_group_of_two_and_single_turn():
  np.testing.assert_allclose(rewards.rank_rewards(np.array([[1, 3], [3, 3]])),
                             [[1, -1], [0, 0]])
  # T = 1: k in {1, 2}, success vs failure.
  np.testing.assert_allclose(rewards.rank_rewards(np.array([[1, 2, 2]])),
                             [[1, -0.5, -0.5]])


def test_a_dropped_member_neither_gets_nor_gives_points():
  # k = 1, 2, 4, 4 with g3 dropped: the tournament is among g0..g2 (n = 3,
  # divide by 2): g0 beats g1 and g2 -> 1; g1 beats g2, loses to g0 -> 0;
  # g2 loses both -> -1; g3 gets 0.
  k = np.array([[1, 2, 4, 4]])
  valid = np.array([[1, 1, 1, 0]], bool)
  np.testing.assert_allclose(rewards.rank_rewards(k, valid), [[1, 0, -1, 0]],
                             atol=1e-6)
  # One valid member left: no pairs, reward 0.
  np.testing.assert_allclose(
      rewards.rank_rewards(k, np.array([[1, 0, 0, 0]], bool)), [[0] * 4])


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 4), st.integers(2, 8)),
                  elements=st.integers(1, 4)))
def test_rank_rewards_zero_sum_and_bounded(k_PG):
  r = np.asarray(rewards.rank_rewards(k_PG))
  np.testing.assert_allclose(r.sum(axis=1), 0, atol=1e-5)
  assert (r >= -1 - 1e-6).all() and (r <= 1 + 1e-6).all()
  # Earlier success never gets less reward.
  for row_k, row_r in zip(k_PG, r):
    order = np.argsort(row_k, kind='stable')
    assert (np.diff(row_r[order]) <= 1e-6).all()


def test_binary_rewards_and_turn_returns():
  np.testing.assert_allclose(rewards.binary_rewards(np.array([[1, 3, 4]]), 3),
                             [[1, 1, 0]])
  ok = np.array([[[0, 0, 1], [0, 1, 0]]], bool)
  active = np.array([[[1, 1, 1], [1, 1, 0]]], bool)
  np.testing.assert_allclose(rewards.turn_returns(ok, active, 0.5),
                             [[[0.25, 0.5, 1], [0.5, 1, 0]]])


def test_speed_gate_needs_significance():
  # p = 1.2 (log 0.182), noise 0.1: 1.5 passes (0.405 - 0.182 > 0.1), 1.3
  # does not (0.262 - 0.182 < 0.1); an incorrect candidate never does.
  ok = np.array([[[1, 1, 0]]], bool)
  log_s = np.log(np.array([[[1.5, 1.3, 3.0]]], np.float32))
  noise = np.full((1, 1, 3), 0.1, np.float32)
  np.testing.assert_array_equal(rewards.speed_gate_ok(ok, log_s, noise, 1.2),
                                [[[1, 0, 0]]])
  nan = np.full((1, 1, 3), NAN, np.float32)
  assert not np.asarray(rewards.speed_gate_ok(ok, nan, nan, 1.0)).any()


def test_speed_tiebreak():
  k = np.array([[1, 1, 2, 4]])
  log_s = np.log(np.array([[2.0, 1.0, 3.0, NAN]], np.float32))
  noise = np.array([[0.1, 0.1, 0.1, NAN]], np.float32)
  r = np.asarray(rewards.speed_tiebreak_rewards(k, log_s, noise, 3))
  # g0 beats g1 on speed (log 2 > sqrt(2) * 0.1), and both beat g2 (later)
  # and g3.
  np.testing.assert_allclose(r, [[1, 1 / 3, -1 / 3, -1]], atol=1e-6)
  # 1.12 vs 1.0: 0.113 clears one band (0.1) but not the pair's
  # sqrt(0.1^2 + 0.1^2) = 0.141: a tie, plain rank rewards.
  close = np.log(np.array([[1.12, 1.0, 3, 1]], np.float32))
  np.testing.assert_allclose(
      rewards.speed_tiebreak_rewards(k, close, noise, 3),
      rewards.rank_rewards(k), atol=1e-6)
  # A wide interval on one side widens the pair's: 2.0 vs 1.0 (0.69) with
  # w 0.7 and 0.1.
  wide = np.array([[0.7, 0.1, 0.1, NAN]], np.float32)
  np.testing.assert_allclose(
      rewards.speed_tiebreak_rewards(k, log_s, wide, 3),
      rewards.rank_rewards(k), atol=1e-6)
  # Two failures never compare speed.
  r_fail = rewards.speed_tiebreak_rewards(
      np.array([[4, 4]]), np.log(np.array([[2.0, 1.0]])),
      np.zeros((1, 2)), 3)
  np.testing.assert_allclose(r_fail, [[0, 0]])


def test_at_first_success():
  s = np.array([[[1.0, 2.0], [3.0, 4.0]]], np.float32)
  out = rewards.at_first_success(s, np.array([[2, 3]]))
  np.testing.assert_allclose(out, [[2.0, NAN]])


def _simulated_estimate(rng, sigma, rounds=20):
  """One timing of two equally fast functions: per-call log-normal noise."""
  a = np.exp(rng.normal(0, sigma, rounds))
  b = np.exp(rng.normal(0, sigma, rounds))
  return timing.speedup_estimate(timing.RoundTimes(tuple(a), tuple(b)),
                                 seed=int(rng.integers(1 << 30)))


def _equal_speed_timings(calibrations=25, pairs=40, sigma=0.15):
  """Per calibration: the band from the environment's default calibration
  (2 tasks x 4 A/A runs, q95 |log ratio|, floor 0.02) and 2 * pairs timings
  of candidates exactly as fast as the reference."""
  rng = np.random.default_rng(0)
  out = []
  for _ in range(calibrations):
    band = timing.noise_band([_simulated_estimate(rng, sigma).median
                              for _ in range(8)], floor=0.02)
    out.append((band, [_simulated_estimate(rng, sigma)
                       for _ in range(2 * pairs)]))
  return out


def _decided_share(timings, noise_fn):
  """Share of same-turn pairs of equally fast candidates the tie-break
  decides (G = 2 groups: r = +-1 when decided, 0 when tied)."""
  decided = []
  for band, ests in timings:
    log_PG = np.log([e.median for e in ests]).reshape(-1, 2)
    noise_PG = np.array([noise_fn(e, band) for e in ests]).reshape(-1, 2)
    r_PG = rewards.speed_tiebreak_rewards(np.ones(log_PG.shape, np.int32),
                                          log_PG, noise_PG, 3)
    decided.append(np.abs(np.asarray(r_PG[:, 0])) == 1)
  return float(np.mean(decided))


def test_equal_speeds_are_rarely_told_apart_at_the_default_band():
  timings = _equal_speed_timings()
  default = _decided_share(timings, lambda e, band: timing.log_halfwidth(
      e.median, e.ci_low, e.ci_high, band))
  # What the former rules gave: band 0 (every pair is decided by noise)
  # and a bare point ratio against the band (|diff| > band).
  no_band = _decided_share(timings, lambda e, band: 0.0)
  point = _decided_share(timings, lambda e, band: band / math.sqrt(2))
  print(f'pairs decided among equal speeds: default {default:.3f}, point '
        f'ratio vs band {point:.3f}, band 0 {no_band:.3f}')
  assert default <= 0.06
  assert point > 0.1 and no_band > 0.95

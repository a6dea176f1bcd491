"""Per-turn advantages: LEAP's credit, the presets and switch combinations
by hand, the harness_error rule."""

import chex
import jax
import numpy as np
import pytest

from leap_jax.rl import advantages, dcp
from leap_jax.rl.config import RLConfig


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


# One group of G = 4, T = 3: g0 solved at turn 1, g1 at turn 2, g2 and g3
# never (all three turns).
OK = np.array([[[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]]], bool)
ACTIVE = np.array([[[1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 1, 1]]], bool)


def test_leap_preset_by_hand():
  # k = 1, 2, 4, 4: r = [1, 1/3, -2/3, -2/3]; credit gamma^(n-t) r for r > 0.
  a = advantages.turn_advantages(RLConfig(), OK, ACTIVE)
  np.testing.assert_allclose(
      a, [[[1, 0, 0], [1 / 6, 1 / 3, 0], [-2 / 3] * 3, [-2 / 3] * 3]],
      atol=1e-6)


def test_multiturn_full_preset_by_hand():
  # Returns on active turns: 1 | .5, 1 | 0 0 0 | 0 0 0 (9 turns): mean 2.5/9.
  a = advantages.turn_advantages(RLConfig(mode='multiturn_full'), OK, ACTIVE)
  r = np.array([1, .5, 1, 0, 0, 0, 0, 0, 0])
  mean, std = r.mean(), r.std()
  z = lambda x: (x - mean) / (std + 1e-6)
  np.testing.assert_allclose(
      a, [[[z(1), 0, 0], [z(.5), z(1), 0], [z(0)] * 3, [z(0)] * 3]],
      atol=1e-5)


def test_grpo_single_turn_preset_by_hand():
  cfg = RLConfig(mode='grpo_single_turn')
  a = advantages.turn_advantages(cfg, OK[..., :1], ACTIVE[..., :1])
  std = np.sqrt(0.25 * 0.75)
  np.testing.assert_allclose(a[0, :, 0], [0.75 / std] + [-0.25 / std] * 3,
                             rtol=1e-4)


def test_binary_trloo_by_hand():
  # Binary: 1 on every turn of g0, g1; 0 on g2, g3. TRLOO per turn: turn 1
  # (all four) 1 - 1/3, 1 - 1/3, -2/3, -2/3; turn 2 (g1, g2, g3) 1, -1/2,
  # -1/2; turn 3 (g2, g3) 0, 0.
  cfg = RLConfig(reward='binary', baseline='trloo')
  a = advantages.turn_advantages(cfg, OK, ACTIVE)
  np.testing.assert_allclose(
      a, [[[2 / 3, 0, 0], [2 / 3, 1, 0], [-2 / 3, -0.5, 0],
           [-2 / 3, -0.5, 0]]], atol=1e-6)


def test_a_dropped_trajectory_alone_leaves_training():
  # g3 dropped (a harness_error): it gets 0 everywhere; the others are
  # ranked among themselves: k = 1, 2, 4 over n = 3 -> r = 1, 0, -1.
  valid = np.array([[1, 1, 1, 0]], bool)
  a = advantages.turn_advantages(RLConfig(), OK, ACTIVE, valid)
  np.testing.assert_allclose(a, [[[1, 0, 0], [0, 0, 0], [-1] * 3, [0] * 3]],
                             atol=1e-6)


@pytest.mark.parametrize('reward', ['rank', 'discounted', 'binary',
                                    'speed_tiebreak', 'speed_gate'])
@pytest.mark.parametrize('baseline', ['none', 'group_norm', 'trloo'])
def test_every_combination_runs_through_one_path(reward, baseline):
  rs = np.random.RandomState(0)
  ok = rs.uniform(size=(5, 4, 3)) < 0.3
  active = np.asarray(dcp.active_mask(np.array([3, 1, 3, 3, 1]), ok))
  valid = rs.uniform(size=(5, 4)) < 0.9
  log_s = np.log(rs.uniform(0.5, 2, (5, 4, 3))).astype(np.float32)
  noise = np.full((5, 4, 3), 0.1, np.float32)
  cfg = RLConfig(reward=reward, baseline=baseline)
  a = advantages.turn_advantages(cfg, ok, active, valid, log_s, noise)
  chex.assert_shape(a, (5, 4, 3))
  assert np.isfinite(a).all()
  assert not a[~active].any() and not a[~valid].any()
  assert a.any()  # some signal in a batch with successes and failures


def test_speed_tiebreak_needs_speedups():
  with pytest.raises(ValueError, match='timed'):
    advantages.turn_advantages(RLConfig(reward='speed_tiebreak'), OK, ACTIVE)

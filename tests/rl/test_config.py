"""RLConfig: presets over the three switches, defaults, validation."""

import pytest

from leap_jax.rl.config import Method, RLConfig


def test_defaults_follow_the_paper():
  cfg = RLConfig()
  assert (cfg.mode, cfg.num_samples, cfg.max_turns, cfg.gamma) == (
      'leap', 8, 3, 0.5)
  assert cfg.dcp_bounds == (4, 7)  # ceil(G/2), G-1
  assert (cfg.eps_low, cfg.eps_high, cfg.kl_beta) == (0.2, 0.28, 0.0)
  assert cfg.aggregation == 'token_mean'
  assert cfg.negative_weight == 1.0 and cfg.slip_prob > 0
  assert cfg.dual_clip == 3.0     # verl's clip_ratio_c
  assert cfg.speed_band < 0       # the calibrated band
  assert RLConfig(num_samples=5).dcp_bounds == (3, 4)
  assert RLConfig(t_min=1, t_max=2).dcp_bounds == (1, 2)


def test_presets_resolve_to_switches():
  assert RLConfig().method == Method('dcp', 'rank', 'none')
  assert RLConfig(mode='multiturn_full').method == Method(
      'none', 'discounted', 'group_norm')
  assert RLConfig(mode='grpo_single_turn').method == Method(
      'none', 'binary', 'group_norm')


def test_a_switch_set_by_hand_overrides_only_itself():
  cfg = RLConfig(mode='multiturn_full', pruning='dcp')
  assert cfg.method == Method('dcp', 'discounted', 'group_norm')
  cfg = RLConfig(reward='speed_tiebreak', baseline='trloo')
  assert cfg.method == Method('dcp', 'speed_tiebreak', 'trloo')
  # replace(mode=...) switches the preset; explicit fields stay explicit.
  assert cfg.replace(mode='multiturn_full').method == Method(
      'none', 'speed_tiebreak', 'trloo')


def test_single_turn_mode_uses_one_turn():
  assert RLConfig(mode='grpo_single_turn', max_turns=3).turns == 1
  assert RLConfig(mode='multiturn_full', max_turns=3).turns == 3


@pytest.mark.parametrize('field, value', [('mode', 'ppo'), ('reward', 'x'),
                                          ('pruning', 'half'),
                                          ('baseline', 'rloo'),
                                          ('aggregation', 'sum'),
                                          ('num_samples', 1),
                                          ('negative_weight', -0.5),
                                          ('negative_weight', 1.5),
                                          ('slip_prob', 1.0),
                                          ('slip_prob', -0.1),
                                          ('negative_max_prob', 0.0),
                                          ('negative_max_prob', 1.5),
                                          ('dual_clip', 0.5),
                                          ('mini_batches', 0),
                                          ('epochs', 0)])
def test_bad_values_are_errors(field, value):
  with pytest.raises(ValueError, match=f'rl.{field}|num_samples'):
    RLConfig(**{field: value})


def test_speed_rewards_need_timing():
  for reward in ('speed_tiebreak', 'speed_gate'):
    cfg = RLConfig(reward=reward)
    with pytest.raises(ValueError, match='--config.env.timing=True'):
      cfg.check_timing(False)
    cfg.check_timing(True)
  RLConfig().check_timing(False)
  RLConfig(mode='multiturn_full').check_timing(False)


def test_hashable_for_jit():
  assert hash(RLConfig()) == hash(RLConfig())

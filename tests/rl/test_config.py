"""RLConfig: modes, defaults, validation."""

import pytest

from leap_jax.rl.config import RLConfig


def test_defaults_follow_the_paper():
  cfg = RLConfig()
  assert (cfg.mode, cfg.num_samples, cfg.max_turns, cfg.gamma) == (
      'leap', 8, 3, 0.5)
  assert cfg.dcp_bounds == (4, 7)  # ceil(G/2), G-1
  assert (cfg.eps_low, cfg.eps_high, cfg.kl_beta) == (0.2, 0.28, 0.0)
  assert cfg.aggregation == 'token_mean'
  assert RLConfig(num_samples=5).dcp_bounds == (3, 4)
  assert RLConfig(t_min=1, t_max=2).dcp_bounds == (1, 2)


def test_single_turn_mode_uses_one_turn():
  assert RLConfig(mode='grpo_single_turn', max_turns=3).turns == 1
  assert RLConfig(mode='multiturn_full', max_turns=3).turns == 3


@pytest.mark.parametrize('field, value', [('mode', 'ppo'), ('reward', 'x'),
                                          ('aggregation', 'sum'),
                                          ('num_samples', 1),
                                          ('negative_weight', -0.5),
                                          ('negative_weight', 1.5),
                                          ('mini_batches', 0),
                                          ('epochs', 0)])
def test_bad_values_are_errors(field, value):
  with pytest.raises(ValueError):
    RLConfig(**{field: value})


def test_hashable_for_jit():
  assert hash(RLConfig()) == hash(RLConfig())

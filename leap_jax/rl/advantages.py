"""Per-turn advantages for every (reward, baseline) pair: one code path.

reward -> per-turn rewards R[p,g,t] (rank family: LEAP's per-turn credit of
the trajectory's reward; binary: the outcome on every turn; discounted:
per-turn returns) -> baseline (none | group_norm | trloo) -> negatives
weighed -> 0 on inactive turns and dropped trajectories.
"""

import jax
import jax.numpy as jnp
import numpy as np

from leap_jax.rl import baselines, dcp, rewards
from leap_jax.rl.config import RLConfig


def leap_turn_advantages(rewards_PG: jax.Array, turns_used_PG: jax.Array,
                         max_turns: int, gamma: float) -> jax.Array:
  """A[p,g,t] (t 0-based) for a trajectory of n turns, zero for t >= n.

  r > 0: A[t] = gamma^(n - t) r with 1-based t, so the solving turn gets r
  and earlier turns a discounted share; r <= 0: every turn gets r.
  """
  r_PG1 = jnp.asarray(rewards_PG, jnp.float32)[..., None]
  n_PG1 = jnp.asarray(turns_used_PG, jnp.int32)[..., None]
  t_T = jnp.arange(max_turns, dtype=jnp.int32)
  discount_PGT = jnp.asarray(gamma, jnp.float32) ** (n_PG1 - 1 - t_T)
  adv_PGT = jnp.where(r_PG1 > 0, discount_PGT * r_PG1, r_PG1)
  return jnp.where(t_T < n_PG1, adv_PGT, 0.0)


def weigh_negatives(adv: jax.Array, weight: float) -> jax.Array:
  """Negative advantages times `weight` (1: plain GRPO; 0: positive-only,
  a RAFT-style ablation; the default keeps them and guards slips in the
  loss instead, grpo.slip_mask)."""
  adv = jnp.asarray(adv, jnp.float32)
  return jnp.where(adv < 0, weight * adv, adv)


def turn_rewards(cfg: RLConfig, ok_PGT, active_PGT, valid_PG=None,
                 log_speed_PGT=None, noise_PGT=None) -> jax.Array:
  """R[p,g,t] of the config's reward (ok is already the speed gate's
  success under speed_gate). Zero on inactive turns."""
  reward, turns = cfg.method.reward, ok_PGT.shape[-1]
  k_PG = rewards.first_success_turn(ok_PGT, active_PGT)
  n_PG = dcp.turns_used(active_PGT)
  active_PGT = jnp.asarray(active_PGT, bool)
  if reward == 'discounted':
    return rewards.turn_returns(ok_PGT, active_PGT, cfg.gamma)
  if reward == 'binary':
    solved_PG1 = rewards.binary_rewards(k_PG, turns)[..., None]
    return jnp.where(active_PGT, solved_PG1, 0.0)
  if reward == 'speed_tiebreak':
    if log_speed_PGT is None or noise_PGT is None:
      raise ValueError('speed_tiebreak needs timed verdicts (speedups)')
    r_PG = rewards.speed_tiebreak_rewards(
        k_PG, rewards.at_first_success(log_speed_PGT, k_PG),
        rewards.at_first_success(noise_PGT, k_PG), turns, valid_PG)
  else:  # rank; speed_gate already changed what ok means
    r_PG = rewards.rank_rewards(k_PG, valid_PG)
  return leap_turn_advantages(r_PG, n_PG, turns, cfg.gamma)


def turn_advantages(cfg: RLConfig, ok_PGT, active_PGT, valid_PG=None,
                    log_speed_PGT=None, noise_PGT=None) -> np.ndarray:
  """A[p,g,t] (float32 numpy) for the config's reward and baseline."""
  r_PGT = turn_rewards(cfg, ok_PGT, active_PGT, valid_PG, log_speed_PGT,
                       noise_PGT)
  baseline = cfg.method.baseline
  if baseline == 'group_norm':
    adv_PGT = baselines.group_norm(r_PGT, active_PGT, valid_PG)
  elif baseline == 'trloo':
    adv_PGT = baselines.trloo(r_PGT, active_PGT, valid_PG)
  else:
    adv_PGT = r_PGT
  adv_PGT = np.array(weigh_negatives(adv_PGT, cfg.negative_weight), np.float32)
  adv_PGT[~np.asarray(active_PGT, bool)] = 0.0
  if valid_PG is not None:
    adv_PGT[~np.asarray(valid_PG, bool)] = 0.0
  return adv_PGT

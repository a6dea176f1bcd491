"""Rewards: first-success turns, the rank tournament, binary and discounted
returns, and the speed modes of design.md section 4.

Speed is compared in log space with a noise half-width per timed candidate,
w = env.timing.log_halfwidth = max(band, the bootstrap CI's half-width): two same-turn
successes differ in speed only when |log s_a - log s_b| exceeds
sqrt(w_a^2 + w_b^2) (the half-width of a difference of two independent
estimates); a gate at p passes only when log(s / p) exceeds w. With w the
95% band of A/A noise, equally fast candidates are told apart in ~5% of
pairs, not in every pair as a bare point ratio would.

`valid_PG` marks trajectories that count (False: dropped, the environment
failed them); dropped ones neither get nor give tournament points.
"""

import math

import jax
import jax.numpy as jnp


def first_success_turn(ok_PGT: jax.Array, active_PGT: jax.Array) -> jax.Array:
  """k[p,g]: 1-based first active turn with an ok verdict, T+1 if none."""
  hit_PGT = jnp.asarray(ok_PGT, bool) & jnp.asarray(active_PGT, bool)
  t = hit_PGT.shape[-1]
  first_PG = jnp.argmax(hit_PGT, axis=-1).astype(jnp.int32) + 1
  return jnp.where(jnp.any(hit_PGT, axis=-1), first_PG, t + 1)


def _valid(valid_PG, shape) -> jax.Array:
  return (jnp.ones(shape, bool) if valid_PG is None
          else jnp.asarray(valid_PG, bool))


def _tournament(wins_PGG: jax.Array, valid_PG: jax.Array) -> jax.Array:
  """r[p,g] = 1/(n-1) sum_j wins[p,g,j] over the n valid members."""
  pair_PGG = valid_PG[:, :, None] & valid_PG[:, None, :]
  n_P1 = jnp.sum(valid_PG, axis=1, keepdims=True)
  total_PG = jnp.sum(jnp.where(pair_PGG, wins_PGG, 0), axis=-1)
  return (total_PG.astype(jnp.float32)
          / jnp.maximum(n_P1 - 1, 1).astype(jnp.float32))


def rank_rewards(first_turn_PG: jax.Array,
                 valid_PG: jax.Array | None = None) -> jax.Array:
  """r[p,g] = 1/(G-1) sum_{j != g} sign(k[p,j] - k[p,g]); zero-sum, [-1, 1].

  k = T+1 means never solved: two failures tie, any success beats a failure.
  """
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  # sign(k_j - k_g): positive when g succeeded earlier than j. j == g adds 0.
  wins_PGG = jnp.sign(k_PG[:, None, :] - k_PG[:, :, None])
  return _tournament(wins_PGG, _valid(valid_PG, k_PG.shape))


def speed_gate_ok(ok_PGT: jax.Array, log_speed_PGT: jax.Array,
                  noise_PGT: jax.Array, p: float) -> jax.Array:
  """Success = correct and significantly faster than p times the reference:
  log(s / p) > w. Untimed candidates (NaN) fail."""
  margin_PGT = (jnp.asarray(log_speed_PGT, jnp.float32) - math.log(p)
                - jnp.asarray(noise_PGT, jnp.float32))
  return jnp.asarray(ok_PGT, bool) & (margin_PGT > 0)


def speed_tiebreak_rewards(first_turn_PG: jax.Array, log_speed_PG: jax.Array,
                           noise_PG: jax.Array, max_turns: int,
                           valid_PG: jax.Array | None = None) -> jax.Array:
  """Rank reward where a pair solved at the same turn goes to the faster
  candidate when the difference clears both noises (see module doc);
  otherwise it stays a tie. log_speed_PG / noise_PG belong to the solving
  candidate (NaN when unsolved or untimed). Zero-sum, in [-1, 1]."""
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  wins_PGG = jnp.sign(k_PG[:, None, :] - k_PG[:, :, None])
  log_PG = jnp.asarray(log_speed_PG, jnp.float32)
  w_PG = jnp.asarray(noise_PG, jnp.float32)
  diff_PGG = log_PG[:, :, None] - log_PG[:, None, :]  # > 0: g faster than j
  width_PGG = jnp.sqrt(w_PG[:, :, None] ** 2 + w_PG[:, None, :] ** 2)
  faster_PGG = jnp.where(jnp.abs(diff_PGG) > width_PGG, jnp.sign(diff_PGG), 0)
  faster_PGG = jnp.nan_to_num(faster_PGG, nan=0.0).astype(wins_PGG.dtype)
  same_solved_PGG = ((k_PG[:, None, :] == k_PG[:, :, None])
                     & (k_PG[:, :, None] <= max_turns))
  return _tournament(jnp.where(same_solved_PGG, faster_PGG, wins_PGG),
                     _valid(valid_PG, k_PG.shape))


def at_first_success(x_PGT: jax.Array, first_turn_PG: jax.Array) -> jax.Array:
  """x at the solving turn (speedup, noise, ...); NaN when never solved."""
  x_PGT = jnp.asarray(x_PGT, jnp.float32)
  t = x_PGT.shape[-1]
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  idx_PG1 = jnp.clip(k_PG - 1, 0, t - 1)[..., None]
  x_PG = jnp.take_along_axis(x_PGT, idx_PG1, axis=-1)[..., 0]
  return jnp.where(k_PG <= t, x_PG, jnp.nan)


def binary_rewards(first_turn_PG: jax.Array, max_turns: int) -> jax.Array:
  """1 for a trajectory solved within its turns, else 0."""
  return (jnp.asarray(first_turn_PG) <= max_turns).astype(jnp.float32)


def turn_returns(ok_PGT: jax.Array, active_PGT: jax.Array,
                 gamma: float) -> jax.Array:
  """R[p,g,t] = sum_{i>=t} gamma^(i-t) s_i, s = 1 for an active ok turn
  (Kevin's discounted per-turn returns)."""
  s_PGT = (jnp.asarray(ok_PGT, bool)
           & jnp.asarray(active_PGT, bool)).astype(jnp.float32)
  t = s_PGT.shape[-1]
  lag_TT = jnp.arange(t)[None, :] - jnp.arange(t)[:, None]  # i - t
  disc_TT = jnp.where(lag_TT >= 0,
                      jnp.asarray(gamma, jnp.float32) ** jnp.maximum(lag_TT, 0),
                      0.0)
  return jnp.einsum('pgi,ti->pgt', s_PGT, disc_TT)

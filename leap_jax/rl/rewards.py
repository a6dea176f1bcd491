"""First-success turns and the rank (pairwise tournament) reward.

Speed modes of design.md section 4: `speed_gate` redefines success as
correct and speedup >= p; `speed_tiebreak` lets the significantly faster of
two candidates solved at the same turn win that pair.
"""

import jax
import jax.numpy as jnp


def first_success_turn(ok_PGT: jax.Array, active_PGT: jax.Array) -> jax.Array:
  """k[p,g]: 1-based first active turn with an ok verdict, T+1 if none."""
  hit_PGT = jnp.asarray(ok_PGT, bool) & jnp.asarray(active_PGT, bool)
  t = hit_PGT.shape[-1]
  first_PG = jnp.argmax(hit_PGT, axis=-1).astype(jnp.int32) + 1
  return jnp.where(jnp.any(hit_PGT, axis=-1), first_PG, t + 1)


def _tournament(wins_PGG: jax.Array) -> jax.Array:
  """r[p,g] = 1/(G-1) sum_j wins[p,g,j] with wins in {-1, 0, 1}."""
  g = wins_PGG.shape[-1]
  return jnp.sum(wins_PGG, axis=-1).astype(jnp.float32) / max(g - 1, 1)


def rank_rewards(first_turn_PG: jax.Array, max_turns: int) -> jax.Array:
  """r[p,g] = 1/(G-1) sum_{j != g} sign(k[p,j] - k[p,g]); zero-sum, [-1, 1].

  max_turns is the T behind k (T+1 = never solved); the formula needs no
  special case for it: two failures tie, any success beats a failure.
  """
  del max_turns
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  # sign(k_j - k_g): positive when g succeeded earlier than j. j == g adds 0.
  return _tournament(jnp.sign(k_PG[:, None, :] - k_PG[:, :, None]))


def speed_gate_ok(ok_PGT: jax.Array, speedup_PGT: jax.Array,
                  p: float) -> jax.Array:
  """Success = correct and speedup >= p (missing speedups are NaN: fail)."""
  return jnp.asarray(ok_PGT, bool) & (jnp.asarray(speedup_PGT) >= p)


def speed_tiebreak_rewards(first_turn_PG: jax.Array, speedup_PG: jax.Array,
                           max_turns: int, band: float = 0.0) -> jax.Array:
  """Rank reward where same-turn successes compare speed.

  speedup_PG is the speedup of the trajectory's successful candidate (NaN
  when unsolved or untimed). A pair solved at the same turn goes to the
  faster one when |log s_g - log s_j| > band; otherwise it stays a tie.
  Still zero-sum and in [-1, 1].
  """
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  wins_PGG = jnp.sign(k_PG[:, None, :] - k_PG[:, :, None])
  log_PG = jnp.log(jnp.asarray(speedup_PG, jnp.float32))
  diff_PGG = log_PG[:, :, None] - log_PG[:, None, :]  # > 0: g faster than j
  faster_PGG = jnp.where(jnp.abs(diff_PGG) > band, jnp.sign(diff_PGG), 0)
  faster_PGG = jnp.nan_to_num(faster_PGG, nan=0.0).astype(wins_PGG.dtype)
  same_solved_PGG = ((k_PG[:, None, :] == k_PG[:, :, None])
                     & (k_PG[:, :, None] <= max_turns))
  return _tournament(jnp.where(same_solved_PGG, faster_PGG, wins_PGG))


def speedup_at_first_success(speedup_PGT: jax.Array,
                             first_turn_PG: jax.Array) -> jax.Array:
  """Speedup of the solving turn's candidate; NaN when never solved."""
  s_PGT = jnp.asarray(speedup_PGT, jnp.float32)
  t = s_PGT.shape[-1]
  k_PG = jnp.asarray(first_turn_PG, jnp.int32)
  idx_PG1 = jnp.clip(k_PG - 1, 0, t - 1)[..., None]
  s_PG = jnp.take_along_axis(s_PGT, idx_PG1, axis=-1)[..., 0]
  return jnp.where(k_PG <= t, s_PG, jnp.nan)

"""Difficulty-Conditioned Pruning: turn budgets and the active-turn mask.

Both are single vectorized array ops (design.md section 2); jit them with
the integer arguments static.
"""

import jax
import jax.numpy as jnp


def turn_budgets(turn1_ok_PG: jax.Array, max_turns: int, t_min: int,
                 t_max: int) -> jax.Array:
  """budget[p] = T if t_min <= n_fail[p] <= t_max else 1; int32 [P]."""
  n_fail_P = jnp.sum(~jnp.asarray(turn1_ok_PG, bool), axis=1)
  middle_P = (n_fail_P >= t_min) & (n_fail_P <= t_max)
  return jnp.where(middle_P, max_turns, 1).astype(jnp.int32)


def full_budgets(num_prompts: int, max_turns: int) -> jax.Array:
  """No pruning (multiturn_full): every prompt may use all T turns."""
  return jnp.full((num_prompts,), max_turns, jnp.int32)


def active_mask(budgets_P: jax.Array, ok_PGT: jax.Array) -> jax.Array:
  """active[p,g,t]: t < budget[p] and no earlier active turn was ok.

  Turns within budget form a prefix, so "no earlier active turn ok" equals
  "no ok among the in-budget turns before t"; ok values outside the budget
  (never evaluated) are ignored.
  """
  ok_PGT = jnp.asarray(ok_PGT, bool)
  t_T = jnp.arange(ok_PGT.shape[-1])
  within_PGT = t_T[None, None, :] < jnp.asarray(budgets_P)[:, None, None]
  hits_PGT = jnp.cumsum(ok_PGT & within_PGT, axis=-1)
  solved_before_PGT = (hits_PGT - (ok_PGT & within_PGT)) > 0  # exclusive
  return within_PGT & ~solved_before_PGT


def turns_used(active_PGT: jax.Array) -> jax.Array:
  """n[p,g]: number of turns the trajectory took; int32 [P, G]."""
  return jnp.sum(active_PGT, axis=-1, dtype=jnp.int32)

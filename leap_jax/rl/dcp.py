"""Turn budgets (DCP, none, random at DCP's count) and the active-turn mask.

Every function is one vectorized array op (design.md section 2); jit them
with the integer arguments static.
"""

import jax
import jax.numpy as jnp


def turn_budgets(turn1_ok_PG: jax.Array, max_turns: int, t_min: int,
                 t_max: int, dropped_PG: jax.Array | None = None) -> jax.Array:
  """budget[p] = T if t_min <= n_fail[p] <= t_max else 1; int32 [P].

  A dropped trajectory (the environment failed it: harness_error) is not a
  failure: it never counts towards n_fail, so it cannot activate a group.
  """
  fail_PG = ~jnp.asarray(turn1_ok_PG, bool)
  if dropped_PG is not None:
    fail_PG = fail_PG & ~jnp.asarray(dropped_PG, bool)
  n_fail_P = jnp.sum(fail_PG, axis=1)
  middle_P = (n_fail_P >= t_min) & (n_fail_P <= t_max)
  return jnp.where(middle_P, max_turns, 1).astype(jnp.int32)


def full_budgets(num_prompts: int, max_turns: int) -> jax.Array:
  """No pruning (multiturn_full): every prompt may use all T turns."""
  return jnp.full((num_prompts,), max_turns, jnp.int32)


def random_budgets(key: jax.Array, num_active: jax.Array, num_prompts: int,
                   max_turns: int) -> jax.Array:
  """T for `num_active` prompts drawn uniformly without replacement, 1 for
  the rest: the control that prunes as much as DCP, but blind."""
  rank_P = jnp.argsort(jnp.argsort(jax.random.uniform(key, (num_prompts,))))
  return jnp.where(rank_P < num_active, max_turns, 1).astype(jnp.int32)


def active_mask(budgets_P: jax.Array, done_PGT: jax.Array) -> jax.Array:
  """active[p,g,t]: t < budget[p] and no earlier active turn ended the
  trajectory (done: ok, or dropped by a harness_error).

  Turns within budget form a prefix, so "no earlier active turn done" equals
  "nothing done among the in-budget turns before t"; values outside the
  budget (never evaluated) are ignored.
  """
  done_PGT = jnp.asarray(done_PGT, bool)
  t_T = jnp.arange(done_PGT.shape[-1])
  within_PGT = t_T[None, None, :] < jnp.asarray(budgets_P)[:, None, None]
  hits_PGT = jnp.cumsum(done_PGT & within_PGT, axis=-1)
  ended_before_PGT = (hits_PGT - (done_PGT & within_PGT)) > 0  # exclusive
  return within_PGT & ~ended_before_PGT


def turns_used(active_PGT: jax.Array) -> jax.Array:
  """n[p,g]: number of turns the trajectory took; int32 [P, G]."""
  return jnp.sum(active_PGT, axis=-1, dtype=jnp.int32)

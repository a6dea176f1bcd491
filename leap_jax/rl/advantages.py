"""LEAP per-turn advantages (design.md section 2) and their negative weight."""

import jax
import jax.numpy as jnp


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
  """Negative advantages times `weight` (1: plain GRPO; 0: positive-only).

  A small, nearly memorised policy samples failures that are mostly slips
  of low-probability tokens; pushing those down spreads probability over
  every context and the policy falls apart, while positive advantages
  sharpen it. Below 1 the update leans on what worked (a RAFT-style
  positive weight), still ranked and credited per turn by the mode.
  """
  adv = jnp.asarray(adv, jnp.float32)
  return jnp.where(adv < 0, weight * adv, adv)

"""LEAP per-turn advantages (design.md section 2)."""

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

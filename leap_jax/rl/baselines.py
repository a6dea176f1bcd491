"""Baselines' rewards and advantages (design.md section 2).

grpo_single_turn: binary reward, group mean/std normalized.
multiturn_full: per-turn returns R_t = sum_{i>=t} gamma^(i-t) s_i, normalized
over all active turns of the prompt's group.
Standard deviations are population (ddof 0) plus eps, so a group where all
agree gets advantage 0, not NaN.
"""

import jax
import jax.numpy as jnp

EPS = 1e-6


def binary_rewards(ok_PG: jax.Array) -> jax.Array:
  return jnp.asarray(ok_PG, jnp.float32)


def group_normalize(rewards_PG: jax.Array, eps: float = EPS) -> jax.Array:
  """(r - mean_g r) / (std_g r + eps) per prompt."""
  r_PG = jnp.asarray(rewards_PG, jnp.float32)
  mean_P1 = jnp.mean(r_PG, axis=1, keepdims=True)
  std_P1 = jnp.std(r_PG, axis=1, keepdims=True)
  return (r_PG - mean_P1) / (std_P1 + eps)


def grpo_single_turn_advantages(ok_PG: jax.Array) -> jax.Array:
  """[P, G] advantages of the single-turn GRPO baseline."""
  return group_normalize(binary_rewards(ok_PG))


def turn_returns(ok_PGT: jax.Array, active_PGT: jax.Array,
                 gamma: float) -> jax.Array:
  """R[p,g,t] = sum_{i>=t} gamma^(i-t) s_i, s = 1 for an active ok turn."""
  s_PGT = (jnp.asarray(ok_PGT, bool)
           & jnp.asarray(active_PGT, bool)).astype(jnp.float32)
  t = s_PGT.shape[-1]
  lag_TT = jnp.arange(t)[None, :] - jnp.arange(t)[:, None]  # i - t
  disc_TT = jnp.where(lag_TT >= 0,
                      jnp.asarray(gamma, jnp.float32) ** jnp.maximum(lag_TT, 0),
                      0.0)
  return jnp.einsum('pgi,ti->pgt', s_PGT, disc_TT)


def multiturn_full_advantages(ok_PGT: jax.Array, active_PGT: jax.Array,
                              gamma: float, eps: float = EPS) -> jax.Array:
  """Returns normalized over the active turns of each prompt's group."""
  active_PGT = jnp.asarray(active_PGT, bool)
  r_PGT = turn_returns(ok_PGT, active_PGT, gamma)
  w_PGT = active_PGT.astype(jnp.float32)
  count_P11 = jnp.maximum(jnp.sum(w_PGT, axis=(1, 2), keepdims=True), 1.0)
  mean_P11 = jnp.sum(r_PGT * w_PGT, axis=(1, 2), keepdims=True) / count_P11
  var_P11 = jnp.sum(w_PGT * (r_PGT - mean_P11) ** 2, axis=(1, 2),
                    keepdims=True) / count_P11
  adv_PGT = (r_PGT - mean_P11) / (jnp.sqrt(var_P11) + eps)
  return jnp.where(active_PGT, adv_PGT, 0.0)

"""Baselines: per-turn rewards R[p,g,t] -> advantages (design.md section 2).

Only counted turns take part (active, of a valid trajectory); the rest get
advantage 0.
group_norm: (R - mean) / (std + eps) over the counted turns of the prompt's
  group (all turns together; with T = 1 this is GRPO's group normalisation).
  Population std (ddof 0) plus eps, so a group where all agree gets 0.
trloo: R minus the mean of the other counted samples of the same prompt and
  turn, no std (Dr. Kernel's TRLOO: the sample is not in its own baseline,
  which removes GRPO's (G-1)/G shrinkage). A turn only one sample reached
  keeps its R (no one to compare with), as in Dr. Kernel.
"""

import jax
import jax.numpy as jnp

EPS = 1e-6


def _counted(active_PGT, valid_PG) -> jax.Array:
  counted_PGT = jnp.asarray(active_PGT, bool)
  if valid_PG is not None:
    counted_PGT = counted_PGT & jnp.asarray(valid_PG, bool)[:, :, None]
  return counted_PGT


def group_norm(returns_PGT: jax.Array, active_PGT: jax.Array,
               valid_PG: jax.Array | None = None,
               eps: float = EPS) -> jax.Array:
  r_PGT = jnp.asarray(returns_PGT, jnp.float32)
  counted_PGT = _counted(active_PGT, valid_PG)
  w_PGT = counted_PGT.astype(jnp.float32)
  count_P11 = jnp.maximum(jnp.sum(w_PGT, axis=(1, 2), keepdims=True), 1.0)
  mean_P11 = jnp.sum(r_PGT * w_PGT, axis=(1, 2), keepdims=True) / count_P11
  var_P11 = jnp.sum(w_PGT * (r_PGT - mean_P11) ** 2, axis=(1, 2),
                    keepdims=True) / count_P11
  adv_PGT = (r_PGT - mean_P11) / (jnp.sqrt(var_P11) + eps)
  return jnp.where(counted_PGT, adv_PGT, 0.0)


def trloo(returns_PGT: jax.Array, active_PGT: jax.Array,
          valid_PG: jax.Array | None = None) -> jax.Array:
  r_PGT = jnp.asarray(returns_PGT, jnp.float32)
  counted_PGT = _counted(active_PGT, valid_PG)
  w_PGT = counted_PGT.astype(jnp.float32)
  n_P1T = jnp.sum(w_PGT, axis=1, keepdims=True)
  others_PGT = jnp.sum(r_PGT * w_PGT, axis=1, keepdims=True) - r_PGT
  loo_PGT = others_PGT / jnp.maximum(n_P1T - 1.0, 1.0)
  adv_PGT = jnp.where(n_P1T > 1, r_PGT - loo_PGT, r_PGT)
  return jnp.where(counted_PGT, adv_PGT, 0.0)

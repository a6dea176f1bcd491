"""Low-precision params, optimizer state in a higher precision.

`with_master_weights(inner, dtype)` wraps an optax transformation: when the
params are in a lower precision than `dtype` (bf16 params, f32 state), the
state keeps a master copy of the params in `dtype`, the gradients are cast
up, the inner optimizer (its moments too) runs on the master copy, and the
params become the updated master rounded to their own dtype. Without it an
AdamW step of lr 1e-6 on bf16 weights (8 mantissa bits) rounds to no
change at all. Params already in `dtype` pass straight through (no copy).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class MasterState(NamedTuple):
  master: Any  # the params in the master dtype; () when they already are
  inner: optax.OptState


def _floating(x) -> bool:
  return jnp.issubdtype(x.dtype, jnp.floating)


def needs_master(params: Any, dtype: Any) -> bool:
  """Whether some floating param is in another dtype than `dtype`."""
  dtype = jnp.dtype(dtype)
  return any(_floating(x) and x.dtype != dtype for x in jax.tree.leaves(params))


def with_master_weights(inner: optax.GradientTransformation,
                        dtype: Any = jnp.float32
                        ) -> optax.GradientTransformation:
  """`inner` over a `dtype` master copy of lower-precision params."""
  dtype = jnp.dtype(dtype)

  def cast(tree):
    return jax.tree.map(lambda x: x.astype(dtype) if _floating(x) else x, tree)

  def init(params):
    if not needs_master(params, dtype):
      return MasterState((), inner.init(params))
    master = cast(params)
    return MasterState(master, inner.init(master))

  def update(grads, state, params=None):
    if isinstance(state.master, tuple) and not state.master:
      updates, inner_state = inner.update(grads, state.inner, params)
      return updates, MasterState((), inner_state)
    updates, inner_state = inner.update(cast(grads), state.inner, state.master)
    master = optax.apply_updates(state.master, updates)
    # As an update on the params, in the master dtype: apply_updates then
    # gives the master rounded to the params' dtype (the difference of two
    # nearby floats is exact, so nothing drifts: the master is the truth).
    to_params = jax.tree.map(
        lambda m, p: m - p.astype(dtype) if _floating(p) else jnp.zeros_like(p),
        master,
        params)
    return to_params, MasterState(master, inner_state)

  return optax.GradientTransformation(init, update)

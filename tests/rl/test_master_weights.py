"""bf16 params against an f32 master copy: small steps accumulate."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from leap_jax.rl import master_weights


def _params(dtype):
  return {'w': jnp.full((4, 3), 0.5, dtype), 'b': jnp.zeros((3,), dtype)}


def _run(optimizer, params, grads, steps):
  state = optimizer.init(params)
  for _ in range(steps):
    updates, state = optimizer.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  return params, state


def test_small_steps_accumulate_in_the_master_copy():
  """SGD steps of 1e-4 on 0.5: bf16 alone rounds every one away (its
  spacing there is 2**-9), the master copy keeps them."""
  grads = _params(jnp.bfloat16)
  grads = jax.tree.map(lambda g: jnp.ones_like(g), grads)
  plain, _ = _run(optax.sgd(1e-4), _params(jnp.bfloat16), grads, 40)
  assert float(plain['w'][0, 0]) == 0.5  # nothing moved
  wrapped = master_weights.with_master_weights(optax.sgd(1e-4))
  params, state = _run(wrapped, _params(jnp.bfloat16), grads, 40)
  assert params['w'].dtype == jnp.bfloat16
  np.testing.assert_allclose(float(state.master['w'][0, 0]), 0.5 - 40e-4,
                             rtol=1e-5)
  # The params are the master rounded to bf16.
  np.testing.assert_array_equal(
      np.asarray(params['w']),
      np.asarray(state.master['w'].astype(jnp.bfloat16)))
  assert float(params['w'][0, 0]) < 0.5


def test_adam_moments_are_f32_over_bf16_params():
  wrapped = master_weights.with_master_weights(optax.adamw(1e-3))
  state = wrapped.init(_params(jnp.bfloat16))
  leaves = jax.tree.leaves(state)
  floats = [x for x in leaves if jnp.issubdtype(x.dtype, jnp.floating)]
  assert floats and all(x.dtype == jnp.float32 for x in floats)


def test_f32_params_pass_straight_through():
  """No copy, and exactly the inner optimizer's steps."""
  params = _params(jnp.float32)
  grads = jax.tree.map(lambda p: jnp.full_like(p, 0.3), params)
  wrapped = master_weights.with_master_weights(optax.adamw(1e-2))
  ours, state = _run(wrapped, params, grads, 3)
  theirs, _ = _run(optax.adamw(1e-2), params, grads, 3)
  assert state.master == ()
  jax.tree.map(np.testing.assert_array_equal, ours, theirs)
  assert not master_weights.needs_master(params, jnp.float32)
  assert master_weights.needs_master(_params(jnp.bfloat16), jnp.float32)


def test_it_jits():
  wrapped = master_weights.with_master_weights(optax.adamw(1e-3))
  params = _params(jnp.bfloat16)
  state = jax.jit(wrapped.init)(params)
  grads = jax.tree.map(jnp.ones_like, params)
  updates, state = jax.jit(wrapped.update)(grads, state, params)
  assert jax.tree.map(lambda u: u.dtype, updates) == {'w': jnp.float32,
                                                      'b': jnp.float32}

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import leap
from leap_jax import run_state


def test_abstract_state_has_the_checkpoint_items():
  params = {"w": jnp.ones((2, 3))}
  state = run_state.abstract_state(params, optax.adam(1e-3))
  assert set(state) == set(run_state.ITEMS)
  assert state["params"]["w"].shape == (2, 3)
  mu = jax.tree.leaves(state["opt_state"])
  assert any(x.shape == (2, 3) for x in mu)
  assert state["rng"].dtype == np.uint32 and state["rng"].shape == (2,)


def test_resumable_fields_pass_fixed_ones_are_all_named():
  saved = leap.get_config("smoke")
  config = leap.get_config("smoke")
  config.num_steps = 99
  config.eval_every = 1
  config.rl.learning_rate = 0.5
  assert run_state.check_resume(saved.to_json(), config, "DIR") == [
      "rl.learning_rate: 0.001 -> 0.5"]
  config.seed = 3
  config.sft.steps = 1
  with pytest.raises(ValueError) as e:
    run_state.check_resume(saved.to_json(), config, "DIR")
  assert str(e.value) == (
      "DIR holds a run with other settings (seed: 0 -> 3; sft.steps: 60 -> 1)"
      "; use another --workdir")


def test_meta_holds_step_position_and_config():
  config = leap.get_config("smoke")
  meta = run_state.meta(3, 6, config)
  assert meta["step"] == 3 and meta["data_position"] == 6
  assert run_state.config_changes(meta["config"], config) == []

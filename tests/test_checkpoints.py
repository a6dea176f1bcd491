import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax import checkpoints


def test_save_restore_round_trip_and_latest(tmp_path):
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", max_to_keep=2)
  state = {"w": jnp.arange(6.0).reshape(2, 3), "step": jnp.int32(0)}
  for step in (1, 2, 3):
    ckpt.save(step, {**state, "step": jnp.int32(step)}, {"data_position": step * 10})
  assert ckpt.all_steps() == [2, 3]
  restored, meta, step = ckpt.restore(state)
  assert step == 3 and meta == {"data_position": 30}
  np.testing.assert_array_equal(restored["w"], state["w"])
  assert int(restored["step"]) == 3
  restored, meta, step = ckpt.restore(state, step=2)
  assert meta["data_position"] == 20


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  ckpt = checkpoints.Checkpoints(tmp_path / "empty")
  with pytest.raises(checkpoints.CheckpointError, match="no checkpoint"):
    ckpt.restore({"w": jnp.zeros(2)})
  with pytest.raises(checkpoints.CheckpointError, match="step 7"):
    ckpt.restore({"w": jnp.zeros(2)}, step=7)


def test_keep_steps_survive_garbage_collection(tmp_path):
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", max_to_keep=1, keep_steps=(0,))
  for step in range(4):
    ckpt.save(step, {"w": jnp.full(2, float(step))}, {})
  assert ckpt.all_steps() == [0, 3]
  restored, _, _ = ckpt.restore({"w": jnp.zeros(2)}, step=0)
  np.testing.assert_array_equal(restored["w"], [0.0, 0.0])

import os
import random
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax import checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


# A child process saves _tree(step) for step = latest + 1, latest + 2, ...
# until it is SIGKILLed; it says "begin N" before each save, "done N" after.
_SAVER = """
import sys
from leap_jax import checkpoints
from tests.test_checkpoints import _tree
ckpt = checkpoints.Checkpoints(sys.argv[1], max_to_keep=2, keep_steps=(1,))
step = (ckpt.latest_step() or 0) + 1
while True:
  print("begin", step, flush=True)
  ckpt.save(step, _tree(step), {"step": step})
  print("done", step, flush=True)
  step += 1
"""
_LEAVES = 1 << 22  # 16 MiB of float32: a save takes ~0.2 s here


def _tree(step):
  """The state saved at `step`: every value derived from the step."""
  return {"w": jnp.arange(_LEAVES, dtype=jnp.float32) + step,
          "s": jnp.full((3,), step, jnp.int32)}


def _saver_killed_after(directory, delay_s):
  """Runs the saver, SIGKILLs it `delay_s` after its first save began;
  its (begin, done) lines."""
  env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}
  child = subprocess.Popen([sys.executable, "-c", _SAVER, str(directory)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, env=env, cwd=ROOT)
  try:
    first = child.stdout.readline()
    time.sleep(delay_s)
  finally:
    child.kill()  # SIGKILL
  lines = (first + child.stdout.read()).split("\n")
  child.wait()
  return [line.split() for line in lines if line]


def test_save_killed_mid_write_never_leaves_a_checkpoint_that_restores_wrong(
    tmp_path):
  directory = tmp_path / "ck"
  rng = random.Random(0)
  done, mid_save = 0, 0
  for _ in range(6):
    lines = _saver_killed_after(directory, rng.uniform(0.0, 1.2))
    assert lines and lines[0][0] == "begin", lines
    began = max(int(n) for what, n in lines if what == "begin")
    done = max([done] + [int(n) for what, n in lines if what == "done"])
    mid_save += lines[-1][0] == "begin"
    ckpt = checkpoints.Checkpoints(directory, max_to_keep=2, keep_steps=(1,))
    # Every finished save is there; the one in flight is there only whole.
    latest = ckpt.latest_step()
    assert latest is not None and done <= latest <= began, (latest, lines)
    for step in ckpt.all_steps():
      restored, meta, got = ckpt.restore(_tree(0), step=step)
      assert got == step and meta == {"step": step}
      for key, want in _tree(step).items():
        np.testing.assert_array_equal(restored[key], want, err_msg=f"{step}")
    ckpt.close()
  assert mid_save >= 3  # the kills did land in the middle of saves

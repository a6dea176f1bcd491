import asyncio
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from orbax.checkpoint._src.path import atomicity

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


ITEMS = ("params", "opt_state", "rng")


def _state(step):
  return {"params": {"w": jnp.arange(6.0) + step},
          "opt_state": {"mu": jnp.full((3,), float(step))},
          "rng": np.array([step, 7], np.uint32)}


def _zeros():
  return jax.tree.map(jnp.zeros_like, _state(0))


def test_items_are_separate_and_params_restore_alone(tmp_path):
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS)
  ckpt.save(2, _state(2), {"step": 2})
  step_dir = tmp_path / "ck" / "2"
  assert {"params", "opt_state", "rng", "meta"} <= set(os.listdir(step_dir))
  # Params alone never touch the optimizer state: restore works without it.
  shutil.rmtree(step_dir / "opt_state")
  state, meta, step = ckpt.restore({"params": _zeros()["params"]})
  assert step == 2 and meta == {"step": 2} and list(state) == ["params"]
  np.testing.assert_array_equal(state["params"]["w"], np.arange(6.0) + 2)
  with pytest.raises(ValueError, match="items"):
    ckpt.restore({"params": _zeros()["params"], "ema": jnp.zeros(2)})
  with pytest.raises(ValueError, match="do not match"):
    ckpt.save(3, {"params": _zeros()["params"]}, {})
  ckpt.close()


def test_the_old_single_item_layout_still_restores(tmp_path):
  old = checkpoints.Checkpoints(tmp_path / "ck")  # one `state` item
  old.save(4, _state(4), {"step": 4})
  old.close()
  assert "state" in os.listdir(tmp_path / "ck" / "4")
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS)
  state, _, _ = ckpt.restore({"params": _zeros()["params"]})
  np.testing.assert_array_equal(state["params"]["w"], np.arange(6.0) + 4)
  state, _, _ = ckpt.restore(_zeros())
  np.testing.assert_array_equal(state["opt_state"]["mu"], [4.0, 4.0, 4.0])
  np.testing.assert_array_equal(state["rng"], [4, 7])
  ckpt.close()


def test_an_asynchronous_save_returns_before_its_files_are_written(
    tmp_path, monkeypatch):
  """The commit (rename of the temporary directory) is held until the test
  lets it go: save() returns, and the caller goes on (here: donates the
  arrays it saved, as the next training step does) while nothing of the
  step is committed. A synchronous save would block here instead."""
  gate, committed_before_return = threading.Event(), []
  finalize = atomicity.AtomicRenameTemporaryPath.finalize

  async def held(self):
    await asyncio.to_thread(gate.wait, 300)
    return await finalize(self)

  monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", held)
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS,
                                 asynchronous=True)
  state = _state(5)
  ckpt.save(5, state, {"step": 5})
  committed_before_return.append(os.path.isdir(tmp_path / "ck" / "5"))
  # The next step overwrites the saved buffers in place (donation).
  bump = jax.jit(lambda t: jax.tree.map(lambda x: x * 0 - 1, t),
                 donate_argnums=0)
  bump({"params": state["params"], "opt_state": state["opt_state"]})
  gate.set()
  ckpt.wait()
  assert committed_before_return == [False]
  assert ckpt.all_steps() == [5]
  restored, _, _ = ckpt.restore(_zeros())
  for key, want in _state(5).items():
    jax.tree.map(np.testing.assert_array_equal, restored[key], want)
  ckpt.close()


def test_the_writer_removes_interrupted_saves_a_reader_leaves_them(tmp_path):
  ckpt = checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS)
  ckpt.save(1, _state(1), {})
  ckpt.close()
  leftover = tmp_path / "ck" / "2.orbax-checkpoint-tmp-1234"  # a killed save
  (leftover / "params").mkdir(parents=True)
  checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS).close()
  assert leftover.exists()
  writer = checkpoints.Checkpoints(tmp_path / "ck", items=ITEMS, writer=True)
  writer.save(3, _state(3), {})  # (orbax finishes its clean-up first)
  writer.close()
  assert not leftover.exists() and writer.all_steps() == [1, 3]


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
    # (None: killed before any save finished, which a loaded machine does.)
    latest = ckpt.latest_step()
    assert done <= (latest or 0) <= began, (latest, lines)
    for step in ckpt.all_steps():
      restored, meta, got = ckpt.restore(_tree(0), step=step)
      assert got == step and meta == {"step": step}
      for key, want in _tree(step).items():
        np.testing.assert_array_equal(restored[key], want, err_msg=f"{step}")
    ckpt.close()
  assert mid_save >= 3  # the kills did land in the middle of saves

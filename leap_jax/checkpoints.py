"""Orbax checkpoints of a run: a state pytree plus JSON metadata, per step.

Saves are atomic (orbax writes to a temporary directory and renames), so a
run killed mid-save leaves the previous step as the latest complete one.
Every process calls save/restore; orbax coordinates multi-host writes.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as preservation


# orbax renames a step it drops into this subdirectory (atomic) and we delete
# it after the save: a kill mid-delete never leaves a half-deleted step listed.
_TODELETE = "todelete"


class CheckpointError(FileNotFoundError):
  """No usable checkpoint where one was expected."""


class Checkpoints:
  """Step-indexed checkpoints under `directory`."""

  def __init__(self, directory: str | os.PathLike, max_to_keep: int | None = 3,
               keep_steps: tuple[int, ...] = (), this_process_only: bool = False):
    """Keeps the latest `max_to_keep` steps plus every step in keep_steps.

    this_process_only: this process saves/restores alone, with host-local
    arrays (the warm start, made by process 0 and read by each process);
    otherwise every process takes part, as orbax needs for sharded state.
    """
    self.directory = os.path.abspath(os.fspath(directory))
    policy = None
    if max_to_keep is not None:
      policy = preservation.AnyPreservationPolicy([
          preservation.LatestN(max_to_keep),
          preservation.CustomSteps(list(keep_steps))])
    self.this_process_only = this_process_only
    if this_process_only:
      os.makedirs(self.directory, exist_ok=True)  # orbax won't, in this mode
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            preservation_policy=policy, create=not this_process_only,
            todelete_subdir=_TODELETE,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                primary_host=jax.process_index(),
                active_processes={jax.process_index()},
                barrier_sync_key_prefix=f"process{jax.process_index()}")
            if this_process_only else ocp.options.MultiprocessingOptions()))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    if self.this_process_only:
      # orbax only writes host-local jax arrays when all processes take
      # part; numpy it writes from the primary host (this one).
      state = jax.tree.map(np.asarray, state)
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
    self._manager.wait_until_finished()
    if self.this_process_only or jax.process_index() == 0:
      shutil.rmtree(os.path.join(self.directory, _TODELETE), ignore_errors=True)

  def restore(self, abstract_state: Any, step: int | None = None
              ) -> tuple[Any, dict[str, Any], int]:
    """(state, meta, step); the latest step unless one is given."""
    step = self._existing(step)
    if self.this_process_only:
      abstract = jax.tree.map(lambda x: np.empty(x.shape, x.dtype),
                              abstract_state)
    else:
      abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
    restored = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    return restored.state, dict(restored.meta), step

  def read_meta(self, step: int | None = None) -> tuple[dict[str, Any], int]:
    """(meta, step) without reading the state; the latest step by default."""
    step = self._existing(step)
    restored = self._manager.restore(
        step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return dict(restored.meta), step

  def _existing(self, step: int | None) -> int:
    step = self.latest_step() if step is None else step
    if step is None or step not in self.all_steps():
      raise CheckpointError(
          f"no checkpoint {'at step ' + str(step) + ' ' if step is not None else ''}"
          f"in {self.directory} (steps there: {self.all_steps() or 'none'})")
    return step

  def close(self) -> None:
    self._manager.close()

"""Orbax checkpoints of a run: a state pytree plus JSON metadata, per step.

Saves are atomic (orbax writes to a temporary directory and renames), so a
run killed mid-save leaves the previous step as the latest complete one.
Every process calls save/restore; orbax coordinates multi-host writes.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp


class CheckpointError(FileNotFoundError):
  """No usable checkpoint where one was expected."""


class Checkpoints:
  """Step-indexed checkpoints under `directory`."""

  def __init__(self, directory: str | os.PathLike, max_to_keep: int | None = 3):
    self.directory = os.path.abspath(os.fspath(directory))
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                             create=True))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
    self._manager.wait_until_finished()

  def restore(self, abstract_state: Any, step: int | None = None
              ) -> tuple[Any, dict[str, Any], int]:
    """(state, meta, step); the latest step unless one is given."""
    step = self.latest_step() if step is None else step
    if step is None or step not in self.all_steps():
      raise CheckpointError(
          f"no checkpoint {'at step ' + str(step) + ' ' if step else ''}in "
          f"{self.directory} (steps there: {self.all_steps() or 'none'})")
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
    restored = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    return restored.state, dict(restored.meta), step

  def close(self) -> None:
    self._manager.close()

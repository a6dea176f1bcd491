"""Orbax checkpoints of a run: named items plus JSON metadata, per step.

Saves are atomic (orbax writes to a temporary directory and renames), so a
run killed mid-save leaves the previous step as the latest complete one.
Every process calls save/restore; orbax coordinates multi-host writes.

With `items` (the trainer: params, opt_state, rng) each top-level entry of
the state is its own orbax item, so a reader restores only what it needs
(evaluation: params). Without, the state is one item, `state` (the warm
start); so was every trainer checkpoint before the split, and those still
restore: the requested entries are read from their `state` item.

`asynchronous=True`: `save` returns once the arrays are copied off the
devices; the files are written in the background. The next save, `wait()`
and `close()` wait for it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as preservation


# orbax renames a step it drops into this subdirectory (atomic) and we delete
# it after the save: a kill mid-delete never leaves a half-deleted step listed.
_TODELETE = "todelete"
STATE_ITEM = "state"  # the single item without `items`; the old trainer layout
META_ITEM = "meta"


class CheckpointError(FileNotFoundError):
  """No usable checkpoint where one was expected."""


class Checkpoints:
  """Step-indexed checkpoints under `directory`."""

  def __init__(self, directory: str | os.PathLike, max_to_keep: int | None = 3,
               keep_steps: tuple[int, ...] = (), this_process_only: bool = False,
               items: Sequence[str] | None = None, asynchronous: bool = False,
               writer: bool = False):
    """Keeps the latest `max_to_keep` steps plus every step in keep_steps.

    this_process_only: this process saves/restores alone, with host-local
    arrays (the warm start, made by process 0 and read by each process);
    otherwise every process takes part, as orbax needs for sharded state.
    items: the state's top-level keys, each saved as its own item.
    writer: the run that writes here: it removes the temporary directories
    of saves a kill interrupted (a reader must not: they may be a live
    run's save in flight).
    """
    self.directory = os.path.abspath(os.fspath(directory))
    self.items = tuple(items) if items else None
    if self.items and {STATE_ITEM, META_ITEM} & set(self.items):
      raise ValueError(f"item names {STATE_ITEM!r} and {META_ITEM!r} are taken")
    self.asynchronous = asynchronous
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
            enable_async_checkpointing=asynchronous,
            cleanup_tmp_directories=writer,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                primary_host=jax.process_index(),
                active_processes={jax.process_index()},
                barrier_sync_key_prefix=f"process{jax.process_index()}")
            if this_process_only else ocp.options.MultiprocessingOptions()))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> float:
    """Starts (asynchronous) or makes the save of `step`; returns the
    seconds this call blocked, the wait for the previous save included."""
    start = time.monotonic()
    self.wait()
    if self.this_process_only:
      # orbax only writes host-local jax arrays when all processes take
      # part; numpy it writes from the primary host (this one).
      state = jax.tree.map(np.asarray, state)
    if self.items:
      missing = set(self.items) ^ set(state)
      if missing:
        raise ValueError(f"state entries {sorted(state)} do not match the "
                         f"checkpoint items {list(self.items)}")
      args = {name: ocp.args.StandardSave(state[name]) for name in self.items}
    else:
      args = {STATE_ITEM: ocp.args.StandardSave(state)}
    self._manager.save(step, args=ocp.args.Composite(
        **args, **{META_ITEM: ocp.args.JsonSave(meta)}))
    if not self.asynchronous:
      self.wait()
    return time.monotonic() - start

  def wait(self) -> None:
    """Until the save in flight (if any) is on disk."""
    self._manager.wait_until_finished()
    if self.this_process_only or jax.process_index() == 0:
      shutil.rmtree(os.path.join(self.directory, _TODELETE), ignore_errors=True)

  def restore(self, abstract_state: Any, step: int | None = None
              ) -> tuple[Any, dict[str, Any], int]:
    """(state, meta, step); the latest step unless one is given.

    With `items`, abstract_state is a dict of some of them (params alone,
    say): only those are read.
    """
    step = self._existing(step)
    abstract = self._abstract(abstract_state)
    if not self.items:
      args = {STATE_ITEM: ocp.args.StandardRestore(abstract)}
    elif not set(abstract) <= set(self.items):
      raise ValueError(f"cannot restore {sorted(abstract)}: the checkpoint "
                       f"items are {list(self.items)}")
    elif self._single_item(step):
      # The old layout: every entry inside one `state` item.
      args = {STATE_ITEM: ocp.args.PyTreeRestore(
          abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(
              abstract), partial_restore=True)}
    else:
      args = {name: ocp.args.StandardRestore(abstract[name])
              for name in abstract}
    restored = self._manager.restore(step, args=ocp.args.Composite(
        **args, **{META_ITEM: ocp.args.JsonRestore()}))
    if not self.items:
      state = restored[STATE_ITEM]
    elif STATE_ITEM in args:
      state = {name: restored[STATE_ITEM][name] for name in abstract}
    else:
      state = {name: restored[name] for name in abstract}
    return state, dict(restored[META_ITEM]), step

  def _abstract(self, abstract_state: Any) -> Any:
    if self.this_process_only:
      return jax.tree.map(lambda x: np.empty(x.shape, x.dtype), abstract_state)
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)

  def _single_item(self, step: int) -> bool:
    names = os.listdir(os.path.join(self.directory, str(step)))
    return STATE_ITEM in names and not set(self.items) & set(names)

  def read_meta(self, step: int | None = None) -> tuple[dict[str, Any], int]:
    """(meta, step) without reading the state; the latest step by default."""
    step = self._existing(step)
    restored = self._manager.restore(
        step, args=ocp.args.Composite(**{META_ITEM: ocp.args.JsonRestore()}))
    return dict(restored[META_ITEM]), step

  def _existing(self, step: int | None) -> int:
    step = self.latest_step() if step is None else step
    if step is None or step not in self.all_steps():
      raise CheckpointError(
          f"no checkpoint {'at step ' + str(step) + ' ' if step is not None else ''}"
          f"in {self.directory} (steps there: {self.all_steps() or 'none'})")
    return step

  def close(self) -> None:
    """Waits for a save in flight, then releases orbax's threads."""
    self.wait()
    self._manager.close()


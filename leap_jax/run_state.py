"""A training run's checkpointed state and what may change on resume.

Each step's checkpoint holds three orbax items, params, opt_state and rng
(the run's key data), plus meta: step, data position, the task stream's
state (what its filter skips by) and the config. They
are written asynchronously (`Checkpoints(asynchronous=True)`): the next
step runs while the files are written. Evaluation restores params alone.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import ml_collections
import numpy as np

from leap_jax import config_report, distributed, layout
from leap_jax.checkpoints import Checkpoints

ITEMS = ("params", "opt_state", "rng")
# Changing these between a run and its resumption is expected.
RESUMABLE_CHANGES = ("num_steps", "checkpoint_every", "workdir",
                     "debug_param_digest", "rollouts_every", "eval_every",
                     "eval_at_start", "eval_split", "eval_tasks",
                     "eval_samples", "wandb_project", "wandb_entity")
# Changing these would resume a different run: an error.
FIXED_ON_RESUME = ("seed", "train_tasks", "model.", "sft.", "variant")


def checkpoints(workdir: str) -> Checkpoints:
  """The run's checkpoints; step 0 (the starting policy) is always kept."""
  return Checkpoints(os.path.join(workdir, "checkpoints"), keep_steps=(0,),
                     items=ITEMS, asynchronous=True, writer=True)


def abstract_params(params: Any, shardings: Any) -> Any:
  """ShapeDtypeStructs of params laid out by `shardings` (one per
  nnx.Variable, as layout.param_shardings gives them)."""
  return distributed.map_with_shardings(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      params, shardings)


def abstract_of(tree: Any) -> Any:
  """ShapeDtypeStructs of a tree's arrays, with their shardings."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(
      x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree)


def abstract_state(params: Any, optimizer: Any,
                   mesh: jax.sharding.Mesh | None = None) -> dict[str, Any]:
  """Shapes and shardings of a checkpoint's items: params, optimizer state
  (laid out as the trainer lays out optimizer.init(params)), RNG key data
  (host)."""
  params = abstract_of(params)
  if mesh is not None:
    opt_state = layout.abstract_opt_state(optimizer, params, mesh)
  else:
    opt_state = jax.jit(optimizer.init).eval_shape(params)
  return {"params": params, "opt_state": opt_state,
          "rng": np.zeros((2,), np.uint32)}


def meta(step: int, position: int, config: ml_collections.ConfigDict,
         stream: dict[str, Any] | None = None) -> dict[str, Any]:
  """stream: the task stream's state (task_stream.TaskStream.state)."""
  return {"step": step, "data_position": position,
          "config": config.to_json(), "task_stream": stream or {}}


def config_changes(saved_json: str, config: ml_collections.ConfigDict
                   ) -> list[str]:
  """'path: before -> after' for each field that differs from the saved
  config, except those a resumed run may change."""
  return [f"{path}: {a!r} -> {b!r}" for path, a, b in
          config_report.differences(json.loads(saved_json), config)
          if path not in RESUMABLE_CHANGES]


def check_resume(saved_json: str, config: ml_collections.ConfigDict,
                 workdir: str) -> list[str]:
  """The allowed changes against the saved config; ValueError naming
  every field that may not change."""
  changes = config_changes(saved_json, config)
  fixed = [c for c in changes if c.startswith(FIXED_ON_RESUME)]
  if fixed:
    raise ValueError(f"{workdir} holds a run with other settings "
                     f"({'; '.join(fixed)}); use another --workdir")
  return changes

"""Which training specs each part of the warm start learns from.

sft.tasks: solution and repair examples; sft.repair_only_tasks: repair
examples alone; sft.self_repair_tasks: stage 2's own failures. Each is a
task set of the training split (kernels_pallas/task_sets.py); the later
ones leave out the specs an earlier one already covers.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_collections

from leap_jax.task_stream import training_tasks


def warm_start_tasks(config: ml_collections.ConfigDict,
                     run_task_ids: Sequence[str]) -> list[str]:
  """What the warm start learns from: the task set config.sft.tasks
  (training split only), or the run's training tasks when it is empty."""
  spec = config.sft.get("tasks", "")
  return training_tasks(spec, "sft.tasks") if spec else list(run_task_ids)


def repair_only_tasks(config: ml_collections.ConfigDict,
                      run_task_ids: Sequence[str]) -> list[str]:
  """Specs that give repair examples and no solution example:
  config.sft.repair_only_tasks (training split) less the warm start's own.

  Why: a spec whose solution example the warm start learns is answered from
  its task text alone, so its repair examples never need the attempt; on
  a spec seen only through repairs the attempt is the best evidence there
  is, which is what a held-out spec's repair needs (WORKSPACE.md, stop 42).
  """
  spec = config.sft.get("repair_only_tasks", "")
  if not spec:
    return []
  pool = training_tasks(spec, "sft.repair_only_tasks")
  seen = set(warm_start_tasks(config, run_task_ids))
  tasks = [t for t in pool if t not in seen]
  if not tasks:
    raise ValueError(f"sft.repair_only_tasks ({spec}) holds only specs the "
                     f"warm start learns solutions of: name others or set "
                     f"it to \"\"")
  return tasks


def self_repair_tasks(config: ml_collections.ConfigDict,
                      run_task_ids: Sequence[str]) -> list[str]:
  """Stage 2's specs: config.sft.self_repair_tasks (training split; "": the
  run's training tasks) less the warm start's own; [] when stage 2 is off."""
  if config.sft.get("self_repair_steps", 0) <= 0:
    return []
  spec = config.sft.get("self_repair_tasks", "")
  pool = (training_tasks(spec, "sft.self_repair_tasks") if spec
          else list(run_task_ids))
  seen = set(warm_start_tasks(config, run_task_ids)) | set(
      repair_only_tasks(config, run_task_ids))
  tasks = [t for t in pool if t not in seen]
  if not tasks:
    raise ValueError(
        f"sft.self_repair_steps = {config.sft.self_repair_steps} but every "
        f"task of sft.self_repair_tasks ({spec or 'the run training tasks'}) "
        f"is one the warm start learns from: its own failures there are "
        f"memorised slips; name unseen training specs or set it to 0")
  return tasks

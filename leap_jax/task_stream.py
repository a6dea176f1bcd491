"""Which tasks a training step prompts with: a deterministic, resumable order.

The run's data position is the number of stream places consumed so far.
Place i is task perm_e[i mod n] with e = i // n and perm_e a seeded
permutation per epoch, so the order follows from (task ids, seed) alone.
`TaskStream` draws from it, skipping (with `TaskFilter` on) the tasks whose
last turn-1 share of correct samples was settled; the shares it skips by
are checkpointed with the position, so a resumed run draws the same tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

import kernels_pallas


SPLITS = ("eval", "train", "all")


def training_tasks(spec: str, field: str = "train_tasks") -> list[str]:
  """Task ids a run trains on: a task-set spec (kernels_pallas.task_sets:
  "train", "gen:train", ids, prefixes such as "level1"), from the training
  split only (the eval split is held out from training). An error names
  the config field the spec came from."""
  try:
    return kernels_pallas.resolve_tasks(spec, split="train")
  except ValueError as e:
    raise ValueError(f"{field}: {e}") from None


def eval_tasks(split: str, spec: str = "", train_spec: str = "train"
               ) -> list[str]:
  """Task ids an evaluation runs on: the split ("eval": the held-out set of
  what train_spec trains on, the suite's or gen:eval; "train"; "all"), or
  only the tasks of it that `spec` names (a task-set spec, as
  kernels_pallas.resolve_tasks reads it: ids, prefixes, gen:eval:48)."""
  if split not in SPLITS:
    raise ValueError(f"eval_split must be one of {', '.join(SPLITS)}, got "
                     f"{split!r}")
  if split == "eval":
    pool = kernels_pallas.resolve_tasks(
        kernels_pallas.eval_set_for(train_spec))
  else:
    pool = kernels_pallas.task_ids(None if split == "all" else split)
  if not spec.strip():
    return pool
  in_pool, out = set(pool), []
  for item in (s.strip() for s in spec.split(",") if s.strip()):
    try:
      picked = [t for t in kernels_pallas.resolve_tasks(item) if t in in_pool]
    except ValueError as e:
      raise ValueError(f"eval_tasks: {e}") from None
    if not picked:
      raise ValueError(f"eval_tasks: {item!r} names no task of the {split} "
                       f"split (python launch/check_kernel.py --list)")
    out += [t for t in picked if t not in out]
  return out


def tasks_at(task_ids: Sequence[str], seed: int, position: int,
             count: int) -> list[str]:
  """The `count` task ids starting at data position `position`."""
  if not task_ids:
    raise ValueError("no tasks to train on")
  if position < 0 or count < 0:
    raise ValueError(f"bad position/count: {position}, {count}")
  n = len(task_ids)
  out, perms = [], {}
  for i in range(position, position + count):
    epoch = i // n
    if epoch not in perms:
      perms[epoch] = np.random.default_rng([seed, epoch]).permutation(n)
    out.append(task_ids[perms[epoch][i % n]])
  return out


@dataclasses.dataclass(frozen=True)
class TaskFilter:
  """Which tasks the stream skips (DAPO's dynamic sampling, per task and
  across steps): a task whose last turn-1 share of correct samples was not
  strictly between `low` and `high` (all right or all wrong by default: a
  group with no gradient at turn 1, which DCP prunes), until it has been
  skipped `recheck_after` times; then it is drawn again, since the policy
  has moved. Never-drawn tasks are drawn."""
  enabled: bool = False
  low: float = 0.0
  high: float = 1.0
  recheck_after: int = 2

  def __post_init__(self):
    if not 0.0 <= self.low < self.high <= 1.0:
      raise ValueError(f"task_filter: need 0 <= low < high <= 1, got low "
                       f"{self.low}, high {self.high}")
    if self.recheck_after < 1:
      raise ValueError("task_filter.recheck_after must be >= 1, got "
                       f"{self.recheck_after}")


class TaskStream:
  """Draws each step's tasks from the run's order (tasks_at), less those
  the filter skips. `state()` goes into the checkpoint beside the data
  position; a stream built from it draws what the saved run would have."""

  def __init__(self, task_ids: Sequence[str], seed: int,
               task_filter: TaskFilter = TaskFilter(),
               state: dict[str, Any] | None = None):
    if not task_ids:
      raise ValueError("no tasks to train on")
    self.task_ids, self.seed, self.filter = list(task_ids), seed, task_filter
    state = state or {}
    self.shares: dict[str, float] = dict(state.get("shares", {}))
    self.skips: dict[str, int] = dict(state.get("skips", {}))

  def state(self) -> dict[str, Any]:
    return {"shares": dict(self.shares), "skips": dict(self.skips)}

  def _skipped(self, task: str) -> bool:
    share = self.shares.get(task)
    return (self.filter.enabled and share is not None
            and not self.filter.low < share < self.filter.high
            and self.skips.get(task, 0) < self.filter.recheck_after)

  def draw(self, position: int, count: int) -> tuple[list[str], int, int]:
    """(tasks, next position, places skipped). Ends: a skipped task is
    drawn after recheck_after skips, so every n * (recheck_after + 1)
    places hold a draw."""
    tasks, skipped = [], 0
    while len(tasks) < count:
      (task,) = tasks_at(self.task_ids, self.seed, position, 1)
      position += 1
      if self._skipped(task):
        self.skips[task] = self.skips.get(task, 0) + 1
        skipped += 1
      else:
        tasks.append(task)
    return tasks, position, skipped

  def record(self, tasks: Sequence[str], turn1_ok: Sequence[int],
             turn1_judged: Sequence[int]) -> None:
    """Each drawn task's turn-1 share: correct over judged samples (a
    harness_error is not judged: the environment's failure says nothing
    of the task's difficulty). A task with none judged keeps its last."""
    for task, ok, judged in zip(tasks, turn1_ok, turn1_judged, strict=True):
      if judged > 0:
        self.shares[task] = ok / judged
        self.skips[task] = 0

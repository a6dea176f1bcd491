"""Which tasks a training step prompts with: a deterministic, resumable order.

The run's data position is the number of prompts consumed so far. Prompt i
is task perm_e[i mod n] with e = i // n and perm_e a seeded permutation per
epoch, so the tasks of any step follow from (task ids, seed, position)
alone: a resumed run continues exactly where the checkpoint left off.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import kernels_pallas


SPLITS = ("eval", "train", "all")


def training_tasks(spec: str) -> list[str]:
  """Task ids a run trains on: a task-set spec (kernels_pallas.task_sets:
  "train", "gen:train", ids, prefixes such as "level1"), from the training
  split only (the eval split is held out from training)."""
  try:
    return kernels_pallas.resolve_tasks(spec, split="train")
  except ValueError as e:
    raise ValueError(f"train_tasks: {e}") from None


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

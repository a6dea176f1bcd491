"""Task-set names -> task ids: the one resolution the trainer, evaluation and
launch scripts share.

A spec is comma-separated items, each one of:
  train | eval | all             the hand-written suite's splits
  gen:train | gen:eval | gen:all the generated tasks' splits; ":N" keeps the
                                 first N (balanced over families, stable):
                                 gen:eval:64
  a task id                      level1/relu, gen/ew_chain/tanh/64x128
  a prefix of ids                level1, gen/row_reduce, gen/ew_chain/tanh
The result keeps the items' order and drops repeats.
"""

from __future__ import annotations

from kernels_pallas import registry

SPLITS = ("train", "eval")
GEN = "gen"


def _generated():
  from kernels_pallas import generated  # pylint: disable=g-import-not-at-top
  return generated


def split_of(task_id: str) -> str:
  """"train" or "eval"; KeyError for an unknown id."""
  if task_id.startswith(registry.GENERATED_PREFIX):  # without compiling it
    gen = _generated()
    return "eval" if gen.held_out(gen.instance(task_id)) else "train"
  return registry.get_task(task_id).split


def _named_set(item: str) -> tuple[list[str], str | None] | None:
  """(ids, split or None for both) of a set name; None if not one."""
  if item in (*SPLITS, "all"):
    split = None if item == "all" else item
    return registry.task_ids(split), split
  parts = item.split(":")
  if parts[0] != GEN or len(parts) not in (2, 3):
    return None
  if parts[1] not in (*SPLITS, "all"):
    raise ValueError(f"{item!r}: the generated sets are gen:train, gen:eval "
                     f"and gen:all (optionally :N)")
  split = None if parts[1] == "all" else parts[1]
  ids = _generated().task_ids(split)
  if len(parts) == 3:
    if not parts[2].isdigit() or int(parts[2]) < 1:
      raise ValueError(f"{item!r}: the count after the split must be a "
                       f"positive integer")
    ids = ids[:int(parts[2])]
  return ids, split


def _prefixed(item: str) -> list[str]:
  prefix = item.rstrip("/") + "/"
  pool = (_generated().task_ids() if item.startswith(GEN + "/") or item == GEN
          else registry.task_ids())
  return [t for t in pool if t == item or t.startswith(prefix)]


def resolve_tasks(spec: str, split: str | None = None) -> list[str]:
  """Task ids of `spec` (module docstring). With `split`, only that split:
  prefixes are filtered to it, and a set or id of the other split is an
  error (the eval split is held out from training)."""
  if split not in (None, *SPLITS):
    raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
  out, seen = [], set()
  for item in (s.strip() for s in spec.split(",")):
    if not item:
      continue
    named = _named_set(item)
    if named is not None:
      ids, set_split = named
      if split is not None and set_split != split:
        raise ValueError(f"{item!r} holds {set_split or 'both'} split tasks; "
                         f"only the {split} split may be used here (the eval "
                         f"split is held out from training)")
    elif _is_id(item):
      ids = [item]
      if split is not None and split_of(item) != split:
        raise ValueError(f"{item} is in the {split_of(item)} split, which is "
                         f"held out here (only {split} tasks may be used)")
    else:
      ids = _prefixed(item)
      if split is not None:
        ids = [t for t in ids if split_of(t) == split]
      if not ids:
        where = {"train": " training", "eval": " eval"}.get(split, "")
        raise ValueError(f"{item!r} names no{where} task (python "
                         f"launch/check_kernel.py --list; generated: gen:all)")
    for t in ids:
      if t not in seen:
        seen.add(t)
        out.append(t)
  if not out:
    raise ValueError(f"the task set {spec!r} is empty")
  return out


def _is_id(item: str) -> bool:
  try:
    split_of(item)
  except KeyError:
    return False
  return True


def eval_set_for(train_spec: str) -> str:
  """The held-out set matching a training spec: "eval" for the suite's
  tasks, "gen:eval" for generated ones, both for a mix."""
  ids = resolve_tasks(train_spec)
  generated = [t.startswith(registry.GENERATED_PREFIX) for t in ids]
  if all(generated):
    return "gen:eval"
  return "eval,gen:eval" if any(generated) else "eval"

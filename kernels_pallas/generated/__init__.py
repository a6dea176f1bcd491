"""Generated task families: seeded specs with a reference and a solution each.

Every family module draws instances from a seeded `random.Random`; the list
of a family is its first COUNT distinct draws, so it is the same on every
machine and run (and grows by appending, never reshuffling). Ids say what a
task is: `gen/<family>/<ops>/<shape>`, e.g. `gen/ew_chain/mul_y-tanh/256x512`.

The split is by spec, never by seed: an instance is held out (eval) when its
op combination is (a stable hash of the combination, one in five) or when
its shape is one of the family's HELD_OUT_SHAPES. So a held-out instance is
an op combination or a size training never saw.
"""

from __future__ import annotations

import functools
import hashlib
import random

from kernels_pallas import registry
from kernels_pallas.generated import ew_chain, matmul_epilogue, row_reduce
from kernels_pallas.generated import source
from kernels_pallas.generated.instance import Instance

FAMILIES = {f.NAME: f for f in (ew_chain, row_reduce, matmul_epilogue)}
HELD_OUT_COMBINATION_MODULUS = 5  # one combination in five is held out
SEED = "kernels_pallas.generated/v1"


def held_out(instance: Instance) -> bool:
  digest = hashlib.sha256(
      f"{instance.family}/{instance.combination}".encode()).digest()
  combination_held_out = int.from_bytes(digest[:8], "big") % (
      HELD_OUT_COMBINATION_MODULUS) == 0
  return (combination_held_out or
          instance.shape in FAMILIES[instance.family].HELD_OUT_SHAPES)


@functools.cache
def instances(family: str) -> tuple[Instance, ...]:
  """The family's COUNT distinct instances, in draw order."""
  module = FAMILIES[family]
  rng = random.Random(f"{SEED}/{family}")
  seen, out = set(), []
  while len(out) < module.COUNT:
    instance = module.draw(rng)
    if instance.task_id not in seen:
      seen.add(instance.task_id)
      out.append(instance)
  return tuple(out)


@functools.cache
def _by_id() -> dict[str, Instance]:
  return {i.task_id: i for f in FAMILIES for i in instances(f)}


def instance(task_id: str) -> Instance:
  try:
    return _by_id()[task_id]
  except KeyError:
    raise KeyError(f"unknown generated task {task_id!r} (ids look like "
                   f"gen/<family>/<ops>/<shape>; families: "
                   f"{', '.join(FAMILIES)})") from None


def task_ids(split: str | None = None, family: str | None = None) -> list[str]:
  """Generated ids, interleaved over families (so any prefix of the list is
  balanced), optionally of one split ("train"/"eval") or family."""
  if split not in (None, "train", "eval"):
    raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
  if family is not None and family not in FAMILIES:
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
  per_family = [
      [i.task_id for i in instances(f)
       if split is None or held_out(i) == (split == "eval")]
      for f in FAMILIES if family in (None, f)]
  out = []
  for k in range(max(map(len, per_family))):
    out += [ids[k] for ids in per_family if k < len(ids)]
  return out


@functools.cache
def get_task(task_id: str) -> registry.Task:
  """The registry's Task of a generated id; callables made from its texts."""
  spec = instance(task_id)
  return registry.Task(
      task_id=task_id, level=spec.level, description=spec.description,
      make_inputs=spec.make_inputs,
      reference=source.compile_function(spec.reference_text, "reference"),
      solution=source.compile_function(spec.candidate_text, "kernel"),
      atol=spec.atol, rtol=spec.rtol, reference_text=spec.reference_text,
      candidate_text=spec.candidate_text, held_out=held_out(spec))

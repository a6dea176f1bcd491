"""Task discovery and the train/eval split.

A task module `kernels_pallas/levelN/name.py` defines:
  DESCRIPTION: str         what to compute, in words (shown to the model)
  ATOL, RTOL: float        tolerances for allclose against the reference
  make_inputs(key)         -> tuple of arrays, in the order `kernel` takes them
  reference(*inputs)       plain jnp, the ground truth
  solution(*inputs)        Pallas kernels (no `interpret=`), passes the environment
Its id is "levelN/name". Generated tasks (kernels_pallas/generated) have no
module: their reference and solution are source text made from a spec, and
their ids start with "gen/". `resolve_tasks` (task_sets.py) turns task-set
names ("train", "gen:eval", ids, prefixes) into ids.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

import jax

LEVELS = ("level1", "level2", "level3")
GENERATED_PREFIX = "gen/"

# Held out from training; stable across releases (append, never reshuffle).
EVAL_TASK_IDS = frozenset({
    "level1/softmax",
    "level1/gelu",
    "level1/col_sum",
    "level2/matmul_bias_relu",
    "level3/causal_attention",
    # Added with the 100+ suite (about 20% of the new tasks, every level).
    "level1/tanh", "level1/hardswish", "level1/col_max", "level1/row_argmin",
    "level1/rms_norm", "level1/log_softmax", "level1/matmul_abt",
    "level1/conv1d", "level1/max_pool2d", "level1/cumsum_cols",
    "level1/cross_entropy",
    "level2/matmul_bias_silu", "level2/layer_norm_gelu", "level2/add_layer_norm",
    "level2/causal_softmax", "level2/conv2d_relu", "level2/rope",
    "level2/add_rms_norm_bf16",
    "level3/mqa_attention", "level3/conv_block", "level3/rmsnorm_gated_mlp_block",
})


@dataclasses.dataclass(frozen=True)
class Task:
  """One kernel task, loaded from its module."""
  task_id: str
  level: int
  description: str
  make_inputs: Callable[[jax.Array], tuple[jax.Array, ...]]
  reference: Callable[..., Any]
  solution: Callable[..., Any]
  atol: float
  rtol: float
  # Generated tasks: the texts their callables were made from, and the
  # split of their spec (hand-written tasks: their module, EVAL_TASK_IDS).
  reference_text: str | None = None
  candidate_text: str | None = None
  held_out: bool | None = None

  @property
  def split(self) -> str:
    held_out = (self.task_id in EVAL_TASK_IDS if self.held_out is None
                else self.held_out)
    return "eval" if held_out else "train"

  @property
  def reference_source(self) -> str:
    if self.reference_text is not None:
      return self.reference_text
    return inspect.getsource(self.reference)

  @property
  def solution_source(self) -> str:
    if self.candidate_text is not None:
      return self.candidate_text
    return inspect.getsource(inspect.getmodule(self.solution))

  @property
  def solution_candidate_source(self) -> str:
    """The solution as a model would answer: kernels, constants, `kernel`.

    Drops the task plumbing (description, tolerances, inputs, reference and
    imports of this package, which candidates may not use). A generated
    task's text is already in that form.
    """
    if self.candidate_text is not None:
      return self.candidate_text
    return candidate_source(self.solution_source)

  def input_shapes(self) -> tuple[jax.ShapeDtypeStruct, ...]:
    return tuple(jax.eval_shape(self.make_inputs, jax.random.key(0)))


_PLUMBING = frozenset({"DESCRIPTION", "ATOL", "RTOL", "make_inputs",
                       "reference"})


def _keeps(node: ast.stmt) -> bool:
  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
    return False  # docstrings
  if isinstance(node, ast.ImportFrom | ast.Import):
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
        a.name for a in node.names]
    return not any(n.split(".")[0] == "kernels_pallas" for n in names)
  if isinstance(node, ast.FunctionDef):
    return node.name not in _PLUMBING
  if isinstance(node, ast.Assign):
    targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
    uses_blocks = any(isinstance(n, ast.Name) and n.id == "_blocks"
                      for n in ast.walk(node.value))
    return not (targets & _PLUMBING) and not uses_blocks
  return True


def candidate_source(module_source: str) -> str:
  """A task module's source reduced to a candidate answer (see Task)."""
  out, previous = [], None
  for node in ast.parse(module_source).body:
    if not _keeps(node):
      continue
    is_import = isinstance(node, ast.Import | ast.ImportFrom)
    if previous is not None:
      out.append("\n" if is_import and previous else "\n\n\n")
    out.append(ast.get_source_segment(module_source, node))
    previous = is_import
  return "".join(out) + "\n\n\nkernel = solution\n"


def _load(level: str, name: str) -> Task:
  module = importlib.import_module(f"kernels_pallas.{level}.{name}")
  missing = [a for a in ("DESCRIPTION", "ATOL", "RTOL", "make_inputs",
                         "reference", "solution") if not hasattr(module, a)]
  if missing:
    raise AttributeError(f"task {level}/{name} lacks {missing}")
  return Task(task_id=f"{level}/{name}", level=int(level[-1]),
              description=module.DESCRIPTION.strip(),
              make_inputs=module.make_inputs, reference=module.reference,
              solution=module.solution, atol=float(module.ATOL),
              rtol=float(module.RTOL))


@functools.cache
def _all() -> dict[str, Task]:
  tasks = {}
  for level in LEVELS:
    package = importlib.import_module(f"kernels_pallas.{level}")
    for info in sorted(pkgutil.iter_modules(package.__path__),
                       key=lambda m: m.name):
      if not info.name.startswith("_"):
        task = _load(level, info.name)
        tasks[task.task_id] = task
  return tasks


def task_ids(split: str | None = None) -> list[str]:
  """Sorted ids of the hand-written suite, optionally of one split ("train"
  or "eval"); generated ids: kernels_pallas.generated.task_ids."""
  if split not in (None, "train", "eval"):
    raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
  return [t for t, task in _all().items() if split in (None, task.split)]


def all_tasks() -> list[Task]:
  return list(_all().values())


def get_task(task_id: str) -> Task:
  """A hand-written task, or a generated one (ids "gen/...")."""
  if task_id.startswith(GENERATED_PREFIX):
    from kernels_pallas import generated  # pylint: disable=g-import-not-at-top
    return generated.get_task(task_id)
  try:
    return _all()[task_id]
  except KeyError:
    raise KeyError(f"unknown task {task_id!r}; known: "
                   f"{', '.join(_all())}") from None

"""Text the embedded tokenizer is trained on: the training split's tasks only.

The eval split is held out from everything the warm start sees.
"""

from __future__ import annotations

import kernels_pallas
from leap_jax.env.candidate import fence
from leap_jax.rl import prompts


def training_tasks() -> list[kernels_pallas.Task]:
  return [kernels_pallas.get_task(t) for t in kernels_pallas.task_ids("train")]


def task_texts(tasks: list[kernels_pallas.Task]) -> list[str]:
  """What the model reads and writes: the system message and each task's
  first prompt (description, reference, contract), retry instruction and
  fenced candidate-form solution."""
  texts = [prompts.SYSTEM, prompts.RETRY]
  for task in tasks:
    texts += [prompts.task_text(task.task_id),
              fence(task.solution_candidate_source)]
  return texts

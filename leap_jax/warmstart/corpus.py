"""Text the embedded tokenizer is trained on: the training split's tasks only.

The eval split is held out from everything the warm start sees.
"""

from __future__ import annotations

import kernels_pallas


def training_tasks() -> list[kernels_pallas.Task]:
  return [kernels_pallas.get_task(t) for t in kernels_pallas.task_ids("train")]


def task_texts(tasks: list[kernels_pallas.Task]) -> list[str]:
  """Descriptions, reference sources and candidate-form solutions."""
  texts = []
  for task in tasks:
    texts += [task.description, task.reference_source,
              task.solution_candidate_source]
  return texts

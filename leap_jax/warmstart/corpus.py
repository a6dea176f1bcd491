"""Text the embedded tokenizer is trained on: the training split's tasks only.

The eval split is held out from everything the warm start sees.
"""

from __future__ import annotations

import kernels_pallas
from leap_jax.env.candidate import fence
from leap_jax.rl import prompts


def check_training_only(task_ids) -> None:
  """ValueError if any task is held out (the eval split never trains)."""
  held_out = [t for t in task_ids if kernels_pallas.split_of(t) == "eval"]
  if held_out:
    raise ValueError(f"eval tasks may not be used for the warm start: "
                     f"{held_out[:5]}{' ...' if len(held_out) > 5 else ''}")


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


def feedback_texts(judged) -> list[str]:
  """The feedback the warm start's mutants got (sft_data.judge): with it in
  the tokenizer's corpus a repair prompt's feedback is a few dozen tokens
  of its own phrases, not hundreds of letter pairs."""
  return [j.feedback for j in judged]

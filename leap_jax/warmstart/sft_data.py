"""Supervised examples for the warm start: solutions and repairs.

Solution examples: the task prompt -> the task's solution. Repair examples:
the task prompt plus a mutated solution and the feedback the environment
really gave it -> the solution. Prompts are rendered exactly as the RL
rollout renders them (leap_jax.rl.prompts), so the warm start learns the
format it will be sampled in.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import kernels_pallas
from leap_jax.env.candidate import fence
from leap_jax.env.verdict import Status
from leap_jax.rl import prompts
from leap_jax.warmstart import corpus, mutations


@dataclasses.dataclass(frozen=True)
class Example:
  task_id: str
  kind: str                 # "solution" or the mutation's name
  prompt_ids: tuple[int, ...]
  answer_ids: tuple[int, ...]


def example(tokenizer, task_id: str, kind: str, history, answer: str,
            stop_id: int) -> Example:
  """The prompt of `history` (Attempts), as the rollout renders it -> answer."""
  prompt = prompts.render(prompts.messages(task_id, history), tokenizer)
  ids = tokenizer.encode(answer, add_special_tokens=False) + [stop_id]
  return Example(task_id, kind, tuple(prompt), tuple(ids))


def solution_text(task_id: str) -> str:
  """The task's solution as an answer: its candidate form, fenced."""
  return fence(kernels_pallas.get_task(task_id).solution_candidate_source)


def solution_example(tokenizer, task_id: str, stop_id: int) -> Example:
  return example(tokenizer, task_id, "solution", [], solution_text(task_id),
                 stop_id)


def build(tokenizer: Any, env: Any, task_ids: Sequence[str], stop_id: int,
          seed: int = 0, repairs_per_task: int | None = None) -> list[Example]:
  """Solution and repair examples for `task_ids` (never the eval split).

  repairs_per_task: at most this many mutations per task (a seeded choice;
  None: every applicable one), each one environment call.
  """
  corpus.check_training_only(task_ids)
  examples, requests, meta = [], [], []
  for task_id in task_ids:
    source = kernels_pallas.get_task(task_id).solution_candidate_source
    solution = solution_text(task_id)
    examples.append(solution_example(tokenizer, task_id, stop_id))
    mutants = sorted(mutations.mutate_all(source, seed).items())
    if repairs_per_task is not None and len(mutants) > repairs_per_task:
      rng = random.Random(f"{seed}:{task_id}")
      mutants = sorted(rng.sample(mutants, repairs_per_task))
    for name, mutated in mutants:
      requests.append((task_id, fence(mutated)))
      meta.append((task_id, name, solution))
  for (task_id, name, solution), request, verdict in zip(
      meta, requests, env.evaluate(requests)):
    if verdict.status in (Status.OK, Status.HARNESS_ERROR):
      continue  # a harmless mutation, or nothing real to learn from
    history = [prompts.Attempt(request[1], verdict.feedback)]
    examples.append(example(tokenizer, task_id, name, history, solution, stop_id))
  return examples

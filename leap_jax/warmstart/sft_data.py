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


@dataclasses.dataclass(frozen=True)
class Judged:
  """A mutant the environment failed, with the feedback it gave."""
  task_id: str
  kind: str        # the mutation's name
  candidate: str   # fenced, as the prompt shows it
  feedback: str


def judge(env: Any, task_ids: Sequence[str], seed: int = 0,
          repairs_per_task: int | None = None) -> list[Judged]:
  """The mutants of `task_ids` (never the eval split) the environment
  failed, in task order. repairs_per_task: at most this many mutations per
  task (a seeded choice; None: every applicable one), each one env call."""
  corpus.check_training_only(task_ids)
  return judge_any_split(env, task_ids, seed, repairs_per_task)


def judge_any_split(env: Any, task_ids: Sequence[str], seed: int = 0,
                    repairs_per_task: int | None = None) -> list[Judged]:
  """judge() without the split check: for measuring a policy on held-out
  tasks (mutant_repair.py), never for training data."""
  requests, kinds = [], []
  for task_id in task_ids:
    source = kernels_pallas.get_task(task_id).solution_candidate_source
    mutants = sorted(mutations.mutate_all(source, seed).items())
    if repairs_per_task is not None and len(mutants) > repairs_per_task:
      rng = random.Random(f"{seed}:{task_id}")
      mutants = sorted(rng.sample(mutants, repairs_per_task))
    for name, mutated in mutants:
      requests.append((task_id, fence(mutated)))
      kinds.append(name)
  return [Judged(task_id, name, text, verdict.feedback)
          for (task_id, text), name, verdict in zip(
              requests, kinds, env.evaluate(requests))
          # ok: a harmless mutation; harness_error: nothing real to learn
          if verdict.status not in (Status.OK, Status.HARNESS_ERROR)]


def build(tokenizer: Any, task_ids: Sequence[str], judged: Sequence[Judged],
          stop_id: int) -> list[Example]:
  """Each task's solution example, then a repair example per judged mutant
  (its prompt holds the mutant and its feedback; the answer: the solution).
  A judged mutant of a task not in task_ids gives its repair example only."""
  corpus.check_training_only(task_ids)
  examples = [solution_example(tokenizer, t, stop_id) for t in task_ids]
  for j in judged:
    history = [prompts.Attempt(j.candidate, j.feedback)]
    examples.append(example(tokenizer, j.task_id, j.kind, history,
                            solution_text(j.task_id), stop_id))
  return examples

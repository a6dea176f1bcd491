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
import time
from collections.abc import Callable, Sequence
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


# Tasks per environment call of judge(): a progress line after each.
PROGRESS_TASKS = 128


def judge(env: Any, task_ids: Sequence[str], seed: int = 0,
          repairs_per_task: int | None = None,
          progress: Callable[..., None] | None = None) -> list[Judged]:
  """The mutants of `task_ids` (never the eval split) the environment
  failed, in task order. repairs_per_task: at most this many mutations per
  task (a seeded choice; None: every applicable one), each one env call.
  `progress(fmt, *args)` hears of every PROGRESS_TASKS tasks judged."""
  corpus.check_training_only(task_ids)
  return judge_any_split(env, task_ids, seed, repairs_per_task, progress)


def _mutants(task_id: str, seed: int,
             repairs_per_task: int | None) -> list[tuple[str, str]]:
  """(mutation name, fenced mutant) of the task's solution."""
  source = kernels_pallas.get_task(task_id).solution_candidate_source
  mutants = sorted(mutations.mutate_all(source, seed).items())
  if repairs_per_task is not None and len(mutants) > repairs_per_task:
    rng = random.Random(f"{seed}:{task_id}")
    mutants = sorted(rng.sample(mutants, repairs_per_task))
  return [(name, fence(mutated)) for name, mutated in mutants]


def judge_any_split(env: Any, task_ids: Sequence[str], seed: int = 0,
                    repairs_per_task: int | None = None,
                    progress: Callable[..., None] | None = None
                    ) -> list[Judged]:
  """judge() without the split check: for measuring a policy on held-out
  tasks (mutant_repair.py), never for training data."""
  judged, start = [], time.monotonic()
  for lo in range(0, len(task_ids), PROGRESS_TASKS):
    requests = [(task_id, name, text)
                for task_id in task_ids[lo:lo + PROGRESS_TASKS]
                for name, text in _mutants(task_id, seed, repairs_per_task)]
    verdicts = env.evaluate([(task_id, text)
                             for task_id, _, text in requests])
    judged += [Judged(task_id, name, text, verdict.feedback)
               for (task_id, name, text), verdict in zip(requests, verdicts)
               # ok: a harmless mutation; harness_error: nothing to learn
               if verdict.status not in (Status.OK, Status.HARNESS_ERROR)]
    if progress:
      done = min(lo + PROGRESS_TASKS, len(task_ids))
      elapsed = time.monotonic() - start
      progress("warm start data: mutants of %d of %d tasks judged, %d "
               "failed, %.0f s elapsed, ETA %.0f s", done, len(task_ids),
               len(judged), elapsed,
               elapsed / done * (len(task_ids) - done))
  return judged


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

"""Repair examples from a policy's own turn-1 failures.

sft_data's repairs are mutations of correct solutions: one-line slips whose
fix is that line. A policy's own failures on specs it was not fine-tuned on
are what it meets at turn 2 in RL (mostly wrong compositions, 90% of them
wrong_output on the testbed). Each one, with the feedback the environment
really gave it, becomes an example prompt + own answer + feedback -> the
spec's solution, rendered as the rollout renders a turn-2 prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from leap_jax.env.verdict import Status
from leap_jax.rl import prompts, rollout_merge
from leap_jax.warmstart import analysis, corpus, sft_data

KIND = "self_repair"
PROGRESS_TASKS = 128


def examples_from_rollout(ro: Any, tokenizer: Any, stop_id: int,
                          feedback: str | None = None
                          ) -> list[sft_data.Example]:
  """One example per distinct failed turn-1 (task, answer) of `ro`
  (harness errors skipped: the environment's fault, nothing to repair);
  `feedback`: replaces every verdict's (the bare-feedback control)."""
  seen, examples = set(), []
  for record in ro.records:
    verdict = record.verdict
    if record.t or verdict.correct or verdict.status == Status.HARNESS_ERROR:
      continue
    task_id = ro.task_ids[record.p]
    key = (task_id, record.completion.text)
    if key in seen:
      continue
    seen.add(key)
    solution = sft_data.solution_text(task_id)
    attempt = prompts.Attempt(record.completion.text,
                              verdict.feedback if feedback is None else feedback)
    examples.append(sft_data.example(tokenizer, task_id, KIND, [attempt],
                                     solution, stop_id))
  return examples


def collect(policy: Any, params: Any, env: Any, task_ids: Sequence[str],
            cfg: Any, num_samples: int, seed: int = 0,
            prompts_per_call: int = 8, judge: Any = None,
            feedback: str | None = None,
            progress: Callable[..., None] | None = None
            ) -> tuple[list[sft_data.Example], dict[str, int]]:
  """(examples, turn-1 answers by status) from `num_samples` turn-1
  answers per task of `task_ids` (training split only); `judge` (default:
  env) gives the verdicts; `progress(fmt, *args)` hears of every block of
  PROGRESS_TASKS tasks."""
  from leap_jax import evaluation  # pylint: disable=g-import-not-at-top
  corpus.check_training_only(task_ids)
  if not task_ids:
    raise ValueError("self_repair.collect: no tasks")
  cfg = cfg.replace(max_turns=1)
  block = max(prompts_per_call, PROGRESS_TASKS // prompts_per_call
              * prompts_per_call)
  parts, start = [], time.monotonic()
  for i in range(0, len(task_ids), block):
    # seed + i: the chunks' rngs of one unpruned_rollout over all of them.
    parts.append(evaluation.unpruned_rollout(
        policy, params, env, task_ids[i:i + block], cfg, num_samples,
        seed + i, prompts_per_call, judge=judge))
    if progress:
      progress("self-repair: turn-1 answers on %d of %d tasks, %.0f s",
               min(i + block, len(task_ids)), len(task_ids),
               time.monotonic() - start)
  ro = rollout_merge.merge(parts)
  stop_id = policy.stop_token_ids[0]
  return (examples_from_rollout(ro, policy.tokenizer, stop_id, feedback),
          analysis.turn1_statuses(ro))

"""Does repair read the feedback? One-line bugs with a known fix.

analysis.py measures repair on the policy's own turn-1 failures, whose
fix is unknown and often more than a line. Here (benchmarks/step0.py
--planted) every attempt is a correct solution with one bug planted
(warmstart/mutations.py) and the environment's real feedback on it, so a
repair needs the one line the feedback points at and a copy of the rest.
Each mutant's repair prompt is sampled with its feedback and with a bare
"wrong", and both are set beside fresh turn-1 samples of the same tasks: a
repair that reads the feedback beats both; one that ignores the attempt
does as well as a fresh sample.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from leap_jax.rl.prompts import Attempt, PromptBuilder
from leap_jax.warmstart import sft_data
from leap_jax.warmstart.analysis import (BARE_FEEDBACK, CachingJudge,
                                         sign_test)


def _sample(policy: Any, prompts: list[list[int]], num_samples: int,
            rng: jax.Array, per_call: int) -> list[Any]:
  out = []
  for i in range(0, len(prompts), per_call):
    out += policy.sample(prompts[i:i + per_call], num_samples,
                         jax.random.fold_in(rng, i))
  return out


def measure(policy: Any, params: Any, env: Any, task_ids: Sequence[str],
            cfg: Any, num_samples: int = 2, seed: int = 0,
            prompts_per_call: int = 16) -> dict[str, Any]:
  """Fresh turn-1 accuracy on task_ids, and the repaired share of the
  planted mutants' samples with the feedback and with bare "wrong" (overall
  and per mutation); `paired`: mutants where the feedback repaired more of
  the num_samples samples than bare "wrong", fewer, and the sign test."""
  judge = CachingJudge(env)
  mutants = sft_data.judge_any_split(judge, task_ids, seed)
  if not mutants:
    raise ValueError("no mutant of these tasks failed: nothing to repair")
  sampler = policy.sampler_policy(params, cfg)
  builder = PromptBuilder.from_config(policy.tokenizer, cfg,
                                      backend=env.config.target_backend)
  rng = jax.random.key(seed)
  fresh = _sample(sampler, [builder.encode(t) for t in task_ids], num_samples,
                  jax.random.fold_in(rng, 0), prompts_per_call)
  fresh_ok = [v.correct for v in judge.evaluate(
      [(task_ids[i // num_samples], c.text) for i, c in enumerate(fresh)])]
  ok_by_arm = {}
  for arm, key in (("feedback", 1), ("bare_feedback", 2)):
    prompts = [builder.encode(m.task_id, [Attempt(
                   m.candidate, BARE_FEEDBACK if key == 2 else m.feedback)])
               for m in mutants]
    answers = _sample(sampler, prompts, num_samples,
                      jax.random.fold_in(rng, key), prompts_per_call)
    verdicts = judge.evaluate([(mutants[i // num_samples].task_id, c.text)
                               for i, c in enumerate(answers)])
    ok_by_arm[arm] = np.array([v.correct for v in verdicts]).reshape(
        len(mutants), num_samples)
  out = {"tasks": len(task_ids), "samples": num_samples,
         "mutants": len(mutants), "fresh_acc": float(np.mean(fresh_ok)),
         "env_calls": judge.env_calls}
  kinds = [m.kind for m in mutants]
  for arm, ok_MS in ok_by_arm.items():
    by_kind = collections.defaultdict(list)
    for kind, row in zip(kinds, ok_MS):
      by_kind[kind].append(row.mean())
    out[arm] = {"repaired": float(ok_MS.mean()),
                "by_mutation": {k: float(np.mean(v))
                                for k, v in sorted(by_kind.items())}}
  more = ok_by_arm["feedback"].sum(1) - ok_by_arm["bare_feedback"].sum(1)
  wins, losses = int((more > 0).sum()), int((more < 0).sum())
  out["paired"] = {"feedback_more": wins, "bare_more": losses,
                   "p": sign_test(wins, losses)}
  return out


def format_report(result: dict[str, Any]) -> str:
  fb, bare = result["feedback"], result["bare_feedback"]
  lines = [f"{result['mutants']} planted one-line bugs in {result['tasks']} "
           f"tasks' solutions, {result['samples']} samples each:",
           f"  repaired with the feedback {100 * fb['repaired']:.1f}%, with "
           f"bare \"{BARE_FEEDBACK}\" {100 * bare['repaired']:.1f}%; a fresh "
           f"turn-1 sample of the same tasks is correct "
           f"{100 * result['fresh_acc']:.1f}%",
           f"  mutants where the feedback repaired more samples "
           f"{result['paired']['feedback_more']}, fewer "
           f"{result['paired']['bare_more']}; sign test p = "
           f"{result['paired']['p']:.3g}",
           f"  {'mutation':<18} {'feedback':>9} {'bare':>7}"]
  for kind, rate in fb["by_mutation"].items():
    lines.append(f"  {kind:<18} {100 * rate:>8.1f}% "
                 f"{100 * bare['by_mutation'][kind]:>6.1f}%")
  lines.append(f"({result['env_calls']} environment calls)")
  return "\n".join(lines)

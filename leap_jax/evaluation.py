"""Multi-turn evaluation of a policy on a task split (no pruning).

Every task gets `num_samples` trajectories of up to T turns (the
multiturn_full schedule: each failure is retried until T), so Acc@t is the
share solved by turn t without DCP's selection. fast_p needs timed verdicts
(env.timing on); on a CPU host those time the Pallas interpreter.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from leap_jax.rl import metrics as metrics_lib, rollout, rollout_merge
from leap_jax.rl.config import RLConfig
from leap_jax.rl.prompts import PromptBuilder


def level_of(task_id: str) -> str:
  """The table's row: a level ("level1"), or a generated family
  ("gen/ew_chain")."""
  parts = task_id.split("/")
  return "/".join(parts[:2]) if parts[0] == "gen" else parts[0]


def unpruned_rollout(policy: Any, params: Any, env: Any,
                     task_ids: Sequence[str], cfg: RLConfig, num_samples: int,
                     seed: int = 0, prompts_per_call: int = 8,
                     judge: Any = None) -> rollout.Rollout:
  """num_samples trajectories of up to T turns per task, every failure
  retried until T (no pruning), `prompts_per_call` tasks per policy call;
  `judge` (default: env) gives the verdicts."""
  cfg = cfg.replace(mode="multiturn_full", num_samples=num_samples,
                    reward="rank")
  sampler_policy = policy.sampler_policy(params, cfg)
  builder = PromptBuilder.from_config(policy.tokenizer, cfg,
                                      backend=env.config.target_backend)
  parts = []
  for i in range(0, len(task_ids), prompts_per_call):
    chunk = list(task_ids[i:i + prompts_per_call])
    parts.append(rollout.rollout(chunk, sampler_policy, judge or env, builder,
                                 cfg, rng=seed + i))
  return rollout_merge.merge(parts)


def evaluate(policy: Any, params: Any, env: Any, task_ids: Sequence[str],
             cfg: RLConfig, num_samples: int, seed: int = 0,
             prompts_per_call: int = 8) -> dict[str, Any]:
  """Acc@1..T, turns_per_pass, fast_p, overall and per level."""
  # Success means correct here, whatever reward the run trained with.
  cfg = cfg.replace(mode="multiturn_full", num_samples=num_samples,
                    reward="rank")
  start = time.monotonic()
  merged = unpruned_rollout(policy, params, env, task_ids, cfg, num_samples,
                            seed, prompts_per_call)
  ok, active, budgets, speed = (merged.ok_PGT, merged.active_PGT,
                                merged.budgets_P, merged.speedup_PGT)

  timed = bool(getattr(env.config, "timing", False))

  def summary(rows):
    return metrics_lib.rollout_metrics(
        ok[rows], active[rows], budgets[rows],
        speed[rows] if timed else None, cfg.fast_ps if timed else ())

  levels = sorted({level_of(t) for t in task_ids})
  result = {"tasks": len(task_ids), "samples_per_task": num_samples,
            "turns": cfg.turns, **summary(slice(None)),
            "levels": {lv: {"tasks": sum(level_of(t) == lv for t in task_ids),
                            **summary(np.array([level_of(t) == lv
                                                for t in task_ids]))}
                       for lv in levels},
            "seconds": time.monotonic() - start}
  result.pop("activated_groups", None)  # every group gets T turns here
  for lv in result["levels"].values():
    lv.pop("activated_groups", None)
  return result


def format_table(results: dict[str, dict[str, Any]], turns: int,
                 fast_ps: Sequence[float]) -> str:
  """One row per (label, level): columns tasks, Acc@t, turns/pass, fast_p."""
  cols = ([f"acc@{t}" for t in range(1, turns + 1)] + ["turns_per_pass"]
          + [f"fast_{p:g}" for p in fast_ps])
  width = max([8] + [len(lv) for res in results.values()
                     for lv in res["levels"]])
  head = f"{'checkpoint':<12} {'level':<{width}} {'tasks':>5} " + " ".join(
      f"{c:>14}" for c in cols)
  lines = [head, "-" * len(head)]
  for label, res in results.items():
    rows = [("all", res)] + sorted(res["levels"].items())
    for level, row in rows:
      vals = " ".join(f"{_fmt(row.get(c)):>14}" for c in cols)
      lines.append(f"{label:<12} {level:<{width}} {row['tasks']:>5} {vals}")
  return "\n".join(lines)


def _fmt(v: Any) -> str:
  if v is None or (isinstance(v, float) and not np.isfinite(v)):
    return "-"
  return f"{v:.3f}"

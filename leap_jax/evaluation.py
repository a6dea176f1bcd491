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

import jax
import numpy as np

from leap_jax.rl import metrics as metrics_lib, rollout, rollout_merge
from leap_jax.rl.config import RLConfig
from leap_jax.rl.prompts import PromptBuilder


def level_of(task_id: str) -> str:
  """The table's row: a level ("level1"), or a generated family
  ("gen/ew_chain")."""
  parts = task_id.split("/")
  return "/".join(parts[:2]) if parts[0] == "gen" else parts[0]


def _unpruned(cfg: RLConfig, num_samples: int) -> RLConfig:
  # Success means correct here, whatever reward the run trained with, and
  # nothing is pruned, whatever pruning it trained with.
  return cfg.replace(mode="multiturn_full", pruning="none",
                     num_samples=num_samples, reward="rank")


def unpruned_rollout(policy: Any, params: Any, env: Any,
                     task_ids: Sequence[str], cfg: RLConfig, num_samples: int,
                     seed: int = 0, prompts_per_call: int = 8,
                     judge: Any = None) -> rollout.Rollout:
  """num_samples trajectories of up to T turns per task, every failure
  retried until T (no pruning), `prompts_per_call` tasks per policy call;
  `judge` (default: env) gives the verdicts."""
  cfg = _unpruned(cfg, num_samples)
  sampler_policy = policy.sampler_policy(params, cfg)
  builder = PromptBuilder.from_config(policy.tokenizer, cfg,
                                      backend=env.config.target_backend)
  parts = []
  for i in range(0, len(task_ids), prompts_per_call):
    chunk = list(task_ids[i:i + prompts_per_call])
    parts.append(rollout.rollout(chunk, sampler_policy, judge or env, builder,
                                 cfg, rng=seed + i))
  return rollout_merge.merge(parts) if parts else _no_rollout(cfg)


def evaluate(policy: Any, params: Any, env: Any, task_ids: Sequence[str],
             cfg: RLConfig, num_samples: int, seed: int = 0,
             prompts_per_call: int = 8,
             across_processes: bool = False) -> dict[str, Any]:
  """Acc@1..T, turns_per_pass, fast_p, overall and per level.

  across_processes: every process evaluates its share of task_ids (every
  n-th) with its own params copy and pool, and all get the whole result
  (a collective: all processes call it together).
  """
  cfg = _unpruned(cfg, num_samples)
  start = time.monotonic()
  mine = list(task_ids)
  if across_processes:
    mine = mine[jax.process_index()::jax.process_count()]
  merged = unpruned_rollout(policy, params, env, mine, cfg, num_samples,
                            seed, prompts_per_call)
  if across_processes:
    merged, _ = rollout_merge.gather(merged, {})
  timed = bool(getattr(env.config, "timing", False))
  result = summarize(merged, cfg, timed)
  result["seconds"] = time.monotonic() - start
  return result


def _no_rollout(cfg: RLConfig) -> rollout.Rollout:
  """A process with no share of the tasks (more processes than tasks)."""
  shape = (0, cfg.num_samples, cfg.turns)
  return rollout.Rollout([], [], np.zeros(shape, bool), np.zeros(shape, bool),
                         np.zeros((0,), np.int32),
                         np.full(shape, np.nan, np.float32), 0)


def summarize(ro: rollout.Rollout, cfg: RLConfig, timed: bool
              ) -> dict[str, Any]:
  """The evaluation's figures from its merged rollout."""
  ok, active, budgets, speed = (ro.ok_PGT, ro.active_PGT, ro.budgets_P,
                                ro.speedup_PGT)
  task_ids = ro.task_ids

  def summary(rows):
    out = metrics_lib.rollout_metrics(
        ok[rows], active[rows], budgets[rows],
        speed[rows] if timed else None, cfg.fast_ps if timed else ())
    out.pop("activated_groups", None)  # every group gets T turns here
    return out

  levels = sorted({level_of(t) for t in task_ids})
  return {"tasks": len(task_ids), "samples_per_task": cfg.num_samples,
          "turns": cfg.turns, **summary(slice(None)),
          "levels": {lv: {"tasks": sum(level_of(t) == lv for t in task_ids),
                          **summary(np.array([level_of(t) == lv
                                              for t in task_ids]))}
                     for lv in levels}}


def as_metrics(result: dict[str, Any]) -> dict[str, Any]:
  """An evaluation as step metrics: eval/acc@t, eval/turns_per_pass, ...,
  eval/levels (per level), seconds_eval."""
  out = {f"eval/{k}": v for k, v in result.items()
         if k not in ("seconds", "turns", "samples_per_task", "trajectories")}
  out["seconds_eval"] = result["seconds"]
  return out


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

"""What a policy brings to RL: first-turn accuracy, repairs, feedback use.

Run unpruned (every failure gets all T turns, evaluation's schedule) and
sort the prompts as DCP would after turn 1, by failures n of G:
all correct (n = 0), easy (1 <= n < t_min), activated (t_min <= n <= t_max),
hopeless (n = G); the defaults t_min = ceil(G/2), t_max = G - 1. Per group
type: failed turn-1 trajectories and how many a later turn repaired.

Two yardsticks for repairs in activated groups:
- resampling: a failed trajectory that instead drew T-1 fresh turn-1
  samples succeeds with 1 - (1 - p)^(T-1), p its group's turn-1 success
  share (averaged over the failed trajectories, like the repair rate);
- the feedback ablation: the same rollout (same turn-1 answers, same
  seeds) with every feedback replaced by a bare "wrong": what repairs owe
  to reading the feedback.
"""

from __future__ import annotations

import collections
import difflib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

GROUP_TYPES = ("all_correct", "easy", "activated", "hopeless")
BARE_FEEDBACK = "wrong"


def group_types(turn1_ok_PG: np.ndarray, t_min: int, t_max: int) -> np.ndarray:
  """[P] group type names (GROUP_TYPES) from the turn-1 successes."""
  g = turn1_ok_PG.shape[1]
  n_fail_P = g - turn1_ok_PG.sum(axis=1)
  return np.select(
      [n_fail_P == 0, n_fail_P < t_min, n_fail_P <= t_max, n_fail_P == g],
      ["all_correct", "easy", "activated", "hopeless"], default="between")


def repair_table(ok_PGT: np.ndarray, t_min: int, t_max: int
                 ) -> dict[str, dict[str, Any]]:
  """Per group type: groups, failed turn-1 trajectories, repaired ones
  (solved at a later turn) and the repair rate (None without failures)."""
  types_P = group_types(ok_PGT[:, :, 0], t_min, t_max)
  failed_PG = ~ok_PGT[:, :, 0]
  repaired_PG = failed_PG & ok_PGT[:, :, 1:].any(axis=2)
  table = {}
  for name in GROUP_TYPES:
    rows = types_P == name
    failed, repaired = int(failed_PG[rows].sum()), int(repaired_PG[rows].sum())
    table[name] = {"groups": int(rows.sum()), "failed": failed,
                   "repaired": repaired,
                   "repair_rate": repaired / failed if failed else None}
  return table


def resample_rate(ok_PGT: np.ndarray, t_min: int, t_max: int,
                  group: str = "activated") -> float | None:
  """Success of T-1 fresh samples in place of a failed trajectory's later
  turns, averaged over the failed trajectories of one group type."""
  turn1_ok_PG = ok_PGT[:, :, 0]
  rows = group_types(turn1_ok_PG, t_min, t_max) == group
  p_P = turn1_ok_PG[rows].mean(axis=1)
  fails_P = (~turn1_ok_PG[rows]).sum(axis=1)
  if not fails_P.sum():
    return None
  extra = ok_PGT.shape[2] - 1
  return float(((1 - (1 - p_P) ** extra) * fails_P).sum() / fails_P.sum())


def accuracy(ok_PGT: np.ndarray) -> dict[str, float]:
  """Acc@t: share of trajectories solved by turn t (unpruned)."""
  solved = np.cumsum(ok_PGT, axis=2) > 0
  return {f"acc@{t + 1}": float(solved[:, :, t].mean())
          for t in range(ok_PGT.shape[2])}


def spread(ok_PGT: np.ndarray) -> dict[str, int]:
  """Tasks by turn-1 successes of G: a histogram, "0" .. "G"."""
  counts = collections.Counter(ok_PGT[:, :, 0].sum(axis=1).tolist())
  return {str(k): counts.get(k, 0) for k in range(ok_PGT.shape[1] + 1)}


def summary(ok_PGT: np.ndarray, t_min: int, t_max: int) -> dict[str, Any]:
  table = repair_table(ok_PGT, t_min, t_max)
  return {**accuracy(ok_PGT), "groups": table,
          "turn1_successes_per_task": spread(ok_PGT),
          "resample_rate_activated": resample_rate(ok_PGT, t_min, t_max),
          "repair_rate_activated": table["activated"]["repair_rate"]}


def paired_repairs(ok_PGT: np.ndarray, bare_ok_PGT: np.ndarray,
                   t_min: int, t_max: int,
                   groups: Sequence[str] = ("easy", "activated", "hopeless")
                   ) -> dict[str, Any]:
  """The same failed turn-1 trajectories (both runs share turn 1) repaired
  with the feedback only, with bare "wrong" only, or both, over `groups`;
  `p`: the exact two-sided sign test of the two discordant counts (what
  feedback adds, where a rate per group is too few trajectories to tell)."""
  if not np.array_equal(ok_PGT[:, :, 0], bare_ok_PGT[:, :, 0]):
    raise ValueError("the two runs' turn-1 verdicts differ: not paired")
  rows_P = np.isin(group_types(ok_PGT[:, :, 0], t_min, t_max), list(groups))
  failed_PG = ~ok_PGT[:, :, 0] & rows_P[:, None]
  with_PG = failed_PG & ok_PGT[:, :, 1:].any(axis=2)
  bare_PG = failed_PG & bare_ok_PGT[:, :, 1:].any(axis=2)
  only_fb, only_bare = int((with_PG & ~bare_PG).sum()), int(
      (bare_PG & ~with_PG).sum())
  return {"failed": int(failed_PG.sum()), "feedback_only": only_fb,
          "bare_only": only_bare, "both": int((with_PG & bare_PG).sum()),
          "p": sign_test(only_fb, only_bare)}


def sign_test(wins: int, losses: int) -> float:
  """Exact two-sided sign test: P(X <= min) for X ~ Binomial(wins +
  losses, 1/2), doubled (1.0 with no discordant pair)."""
  n, k = wins + losses, min(wins, losses)
  tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n if n else 1.0
  return min(1.0, 2 * tail)


class _Relabelled:
  """A verdict whose feedback says only BARE_FEEDBACK."""

  def __init__(self, verdict: Any):
    self._verdict = verdict

  def __getattr__(self, name: str) -> Any:
    return getattr(self._verdict, name)

  @property
  def feedback(self) -> str:
    return BARE_FEEDBACK


class CachingJudge:
  """A judge that asks the environment once per distinct (task, answer).

  A correct answer is correct on any inputs, and a tiny policy repeats
  itself: the ablation's turn-1 answers are the first run's. `bare`
  replaces every verdict's feedback with BARE_FEEDBACK.
  """

  def __init__(self, env: Any, cache: dict | None = None, bare: bool = False):
    self.env, self.bare = env, bare
    self.cache = {} if cache is None else cache
    self.env_calls = 0

  def evaluate(self, requests: Sequence[tuple[str, str]]) -> list[Any]:
    todo = list(dict.fromkeys(r for r in requests if r not in self.cache))
    if todo:
      self.env_calls += len(todo)
      self.cache.update(zip(todo, self.env.evaluate(todo)))
    verdicts = [self.cache[r] for r in requests]
    return [_Relabelled(v) for v in verdicts] if self.bare else verdicts


def turn1_statuses(ro: Any, failures_only: bool = False) -> dict[str, int]:
  """Turn-1 answers (or only the failed ones) by status, most common first."""
  return dict(collections.Counter(
      str(getattr(r.verdict.status, "value", r.verdict.status))
      for r in ro.records if r.t == 0 and not (
          failures_only and r.verdict.correct)).most_common())


def turn1_failures(ro: Any) -> dict[str, int]:
  """Turn-1 failures by status."""
  return turn1_statuses(ro, failures_only=True)


NEAR_COPY_RATIO = 0.95


def turn2_copies(ro: Any) -> dict[str, int]:
  """Turn-2 answers of failed turn-1 trajectories: how many repeat the
  turn-1 answer exactly, how many are near copies (difflib ratio >
  NEAR_COPY_RATIO): a repair that copies the attempt cannot beat a fresh
  sample."""
  by = {(r.p, r.g, r.t): r for r in ro.records}
  out = {"answers": 0, "identical": 0, "near": 0}
  for (p, g, t), second in by.items():
    first = by[(p, g, 0)]
    if t != 1 or first.verdict.correct:
      continue
    a, b = first.completion.text, second.completion.text
    out["answers"] += 1
    if a == b:
      out["identical"] += 1
    elif difflib.SequenceMatcher(None, a, b).ratio() > NEAR_COPY_RATIO:
      out["near"] += 1
  return out


def analyse(policy: Any, params: Any, env: Any, task_ids: Sequence[str],
            cfg: Any, num_samples: int = 8, seed: int = 0,
            prompts_per_call: int = 8) -> dict[str, Any]:
  """summary() of the policy with the environment's feedback and of the
  same rollout with bare feedback, the resampling yardstick, turn-1
  failures by status, environment calls."""
  from leap_jax import evaluation  # pylint: disable=g-import-not-at-top
  # DCP's bounds for this G (RLConfig's rule: -1 takes ceil(G/2), G - 1).
  t_min, t_max = cfg.replace(num_samples=num_samples).dcp_bounds
  judge = CachingJudge(env)
  with_feedback = evaluation.unpruned_rollout(
      policy, params, env, task_ids, cfg, num_samples, seed, prompts_per_call,
      judge=judge)
  bare = CachingJudge(env, judge.cache, bare=True)
  without = evaluation.unpruned_rollout(
      policy, params, env, task_ids, cfg, num_samples, seed, prompts_per_call,
      judge=bare)
  same_turn1 = float((with_feedback.ok_PGT[:, :, 0]
                      == without.ok_PGT[:, :, 0]).mean())
  return {"tasks": len(task_ids), "samples": num_samples,
          "turns": with_feedback.ok_PGT.shape[2], "t_min": t_min,
          "t_max": t_max,
          # None rather than an error at the end of a long run: the report
          # then says the runs were not paired (turn1_same_share < 1).
          "paired": (paired_repairs(with_feedback.ok_PGT, without.ok_PGT,
                                    t_min, t_max)
                     if same_turn1 == 1.0 else None),
          "feedback": summary(with_feedback.ok_PGT, t_min, t_max),
          "bare_feedback": summary(without.ok_PGT, t_min, t_max),
          "turn1_same_share": same_turn1,
          "turn1_failures": turn1_failures(with_feedback),
          "turn2_copies": {"feedback": turn2_copies(with_feedback),
                           "bare_feedback": turn2_copies(without)},
          "env_calls": judge.env_calls + bare.env_calls,
          "ok_PGT": with_feedback.ok_PGT, "bare_ok_PGT": without.ok_PGT}


_LABELS = {"all_correct": "all correct (pruned)",
           "easy": "easy, 1-{e} failures (pruned)",
           "activated": "activated, {a}-{b} failures",
           "hopeless": "hopeless, {g} failures (pruned)"}


def _rate(value: float | None) -> str:
  return "-" if value is None else f"{100 * value:.1f}%"


def _paired_line(paired: dict[str, Any] | None) -> str:
  if paired is None:
    return "no paired repairs: the two runs' turn-1 verdicts differ"
  return (f"the same {paired['failed']} failed trajectories (all groups with "
          f"failures): repaired with feedback only {paired['feedback_only']}, "
          f"with bare \"{BARE_FEEDBACK}\" only {paired['bare_only']}, both "
          f"{paired['both']}; sign test p = {paired['p']:.3g}")


def _copies_lines(copies: dict[str, dict[str, int]] | None) -> list[str]:
  if not copies:
    return []
  parts = []
  for key, name in (("feedback", "with feedback"),
                    ("bare_feedback", f'with bare "{BARE_FEEDBACK}"')):
    c = copies[key]
    parts.append(f"{name} {c['identical']} identical, {c['near']} near "
                 f"copies of {c['answers']}")
  return [f"turn-2 answers after a failed turn 1 (near: difflib ratio > "
          f"{NEAR_COPY_RATIO}): " + "; ".join(parts)]


def format_report(result: dict[str, Any]) -> str:
  """The issue-20 table for both runs, accuracies and the yardsticks."""
  g, t_min, t_max = result["samples"], result["t_min"], result["t_max"]
  labels = {k: v.format(e=t_min - 1, a=t_min, b=t_max, g=g)
            for k, v in _LABELS.items()}
  lines = []
  for key, title in (("feedback", "with the environment's feedback"),
                     ("bare_feedback", f'feedback replaced by "{BARE_FEEDBACK}"')):
    res = result[key]
    accs = ", ".join(f"{k} {v:.3f}" for k, v in res.items()
                     if k.startswith("acc@"))
    lines += [f"{title}: {accs}",
              f"  {'groups at step 0':<34} {'groups':>6} {'failed':>7} "
              f"{'repaired':>9} {'rate':>7}"]
    for name in GROUP_TYPES:
      row = res["groups"][name]
      failed = "-" if name == "all_correct" else str(row["failed"])
      repaired = "-" if name == "all_correct" else str(row["repaired"])
      lines.append(f"  {labels[name]:<34} {row['groups']:>6} {failed:>7} "
                   f"{repaired:>9} {_rate(row['repair_rate']):>7}")
  fb, bare = result["feedback"], result["bare_feedback"]
  lines += [
      f"activated groups: repair {_rate(fb['repair_rate_activated'])} with "
      f"feedback, {_rate(bare['repair_rate_activated'])} with bare "
      f"\"{BARE_FEEDBACK}\"; {result['turns'] - 1} fresh samples would succeed "
      f"{_rate(fb['resample_rate_activated'])}",
      _paired_line(result["paired"]),
      f"turn-1 successes per task (of {g}): {fb['turn1_successes_per_task']}",
      f"turn-1 failures by status: {result['turn1_failures']}",
      *_copies_lines(result.get("turn2_copies")),
      f"({result['tasks']} tasks x {g} samples x up to {result['turns']} "
      f"turns, twice; {result['env_calls']} environment calls; turn-1 "
      f"verdicts equal in both runs: {100 * result['turn1_same_share']:.1f}%)"]
  return "\n".join(lines)

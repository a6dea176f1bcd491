"""Two training runs compared at a fixed accuracy target, over seeds.

What benchmarks/leap_vs_full.py reports (its docstring has the protocol):
per seed, the wall clock, environment calls and sampled tokens each mode
spends until its evaluated Acc@T first reaches the target (censored at the
last evaluated step when it never does), their full / leap ratios, the
mean over seeds with a paired bootstrap interval, and the permutation null
of the mean wall-clock ratio. Pure functions over metrics rows (one dict
per training step) and evaluations (step -> Acc@T).
"""

import numpy as np

COMPARED = ("leap", "multiturn_full")
AXES = ("wall_s", "env_calls", "tokens")


def eval_steps(steps: int, every: int) -> list[int]:
  """Evaluation steps after 0: every `every` steps, and always the last."""
  return sorted({*range(every, steps + 1, every), steps})


def step_walls(rows: list[dict], first_steps: set[int]) -> list[float]:
  """Seconds of each step, a process's first step (compilation) counted at
  the median of the other steps (as measured when there are none)."""
  seconds = [float(r["seconds_step"]) for r in rows]
  warm = [s for r, s in zip(rows, seconds) if r["step"] not in first_steps]
  if not warm:
    return seconds
  typical = float(np.median(warm))
  return [typical if r["step"] in first_steps else s
          for r, s in zip(rows, seconds)]


def cumulative(rows: list[dict], first_steps: set[int]) -> dict[str, dict]:
  """Per axis, step -> total up to and including that step (0 at step 0)."""
  per_step = {"wall_s": step_walls(rows, first_steps),
              "env_calls": [float(r.get("env_calls") or 0) for r in rows],
              "tokens": [float(r.get("tokens_generated") or 0) for r in rows]}
  out = {}
  for axis, values in per_step.items():
    totals = np.cumsum(values).tolist()
    out[axis] = {0: 0.0, **{r["step"]: t for r, t in zip(rows, totals)}}
  return out


def to_target(acc_by_step: dict[int, float], totals: dict[str, dict],
              target: float) -> dict:
  """Totals at the first evaluated step with Acc@T >= target; else at the
  last evaluated step, flagged censored (a lower bound)."""
  steps = sorted(acc_by_step)
  hit = next((s for s in steps if acc_by_step[s] >= target - 1e-9), None)
  step = steps[-1] if hit is None else hit
  return {"step": step, "censored": hit is None,
          **{axis: totals[axis][step] for axis in AXES}}


def ratio(full: dict, leap: dict, axis: str) -> float | None:
  """full / leap on one axis; None when neither reached the target, when
  both reached it at step 0, or when only leap is censored (no bound)."""
  if full["censored"] and leap["censored"]:
    return None
  if leap["censored"] or not leap[axis]:
    return None
  return full[axis] / leap[axis]


def ratio_bound(full: dict, leap: dict, axis: str) -> str | None:
  """full / leap on one axis as a seed's row prints it: exact when both
  reached the target, '>=' when only full is censored, '<=' when only leap
  is (its total at the last step is a lower bound on its own, so the ratio
  is at most this; `ratio` leaves such a seed out of the mean); None when
  neither reached it."""
  if (full["censored"] and leap["censored"]) or not leap[axis]:
    return None
  sign = "<=" if leap["censored"] else ">=" if full["censored"] else ""
  return f"{sign}{full[axis] / leap[axis]:.3f}"


def seed_ratios(accs: dict[str, dict[int, float]], totals: dict[str, dict],
                target: float) -> dict:
  """One seed: each compared mode at the target, and full / leap per axis."""
  reach = {m: to_target(accs[m], totals[m], target) for m in COMPARED}
  return {"reach": reach,
          **{f"{axis}_ratio": ratio(reach["multiturn_full"], reach["leap"],
                                    axis) for axis in AXES}}


def mean_or_none(values) -> float | None:
  values = [v for v in values if v is not None]
  return float(np.mean(values)) if values else None


def paired_bootstrap(values: list[float | None], resamples: int,
                     seed: int = 0) -> tuple[float | None, float | None]:
  """95% interval of the mean over seeds (seeds resampled with
  replacement; seeds without a value are left out)."""
  v = np.asarray([x for x in values if x is not None], np.float64)
  if not len(v):
    return None, None
  idx = np.random.default_rng(seed).integers(0, len(v), (resamples, len(v)))
  low, high = np.quantile(v[idx].mean(axis=1), [0.025, 0.975])
  return float(low), float(high)


def permutation_null(accs_by_seed: list[dict], totals_by_seed: list[dict],
                     targets: list[float], resamples: int,
                     seed: int = 0) -> list[float]:
  """Mean wall-clock ratios when leap's and full's Acc@T are swapped at
  random per seed and evaluation step (each mode keeps its clock)."""
  rng = np.random.default_rng(seed)
  null = []
  for _ in range(resamples):
    ratios = []
    for accs, totals, target in zip(accs_by_seed, totals_by_seed, targets):
      leap, full = dict(accs["leap"]), dict(accs["multiturn_full"])
      for step in set(leap) & set(full):
        if step and rng.random() < 0.5:
          leap[step], full[step] = full[step], leap[step]
      ratios.append(seed_ratios({"leap": leap, "multiturn_full": full},
                                totals, target)["wall_s_ratio"])
    value = mean_or_none(ratios)
    if value is not None:
      null.append(value)
  return null


def null_p(observed: float | None, null: list[float]) -> float | None:
  """One-sided: the share of the null at least as large (+1 smoothing)."""
  if observed is None or not null:
    return None
  return (1 + sum(n >= observed - 1e-12 for n in null)) / (1 + len(null))


def summarize(seeds: list[int], accs_by_seed: list[dict],
              totals_by_seed: list[dict], targets: list[float],
              activated: list[float], resamples: int) -> dict:
  """The headline figures over seeds (see the module docstring)."""
  per_seed = [seed_ratios(a, t, g) for a, t, g in
              zip(accs_by_seed, totals_by_seed, targets)]
  walls = [s["wall_s_ratio"] for s in per_seed]
  low, high = paired_bootstrap(walls, resamples)
  env_low, env_high = paired_bootstrap([s["env_calls_ratio"]
                                        for s in per_seed], resamples)
  gaps = [a["multiturn_full"][max(a["multiturn_full"])]
          - a["leap"][max(a["leap"])] for a in accs_by_seed]
  null = permutation_null(accs_by_seed, totals_by_seed, targets, resamples)
  observed = mean_or_none(walls)
  return {
      "seeds": len(seeds), "seed_ids": seeds, "targets": targets,
      # The means are over the seeds with a ratio: a seed where only leap
      # missed the target has none, so these counts go beside them.
      "reached": {m: sum(not s["reach"][m]["censored"] for s in per_seed)
                  for m in COMPARED},
      "ratio_seeds": sum(w is not None for w in walls),
      # Every seed's ratio or its bound, the seeds left out of the mean too.
      "wallclock_ratio_per_seed": [
          ratio_bound(s["reach"]["multiturn_full"], s["reach"]["leap"],
                      "wall_s") for s in per_seed],
      "wallclock_ratio_mean": observed, "wallclock_ratio_ci_low": low,
      "wallclock_ratio_ci_high": high,
      "env_calls_ratio_mean": mean_or_none(s["env_calls_ratio"]
                                           for s in per_seed),
      "env_calls_ratio_ci": [env_low, env_high],
      "tokens_ratio_mean": mean_or_none(s["tokens_ratio"] for s in per_seed),
      "acc_gap_mean": float(np.mean(gaps)), "acc_gaps": gaps,
      "activated_groups_mean": mean_or_none(activated),
      "null_p": null_p(observed, null),
      "null_median": float(np.median(null)) if null else None,
      "null_5_95": ([float(q) for q in np.quantile(null, [0.05, 0.95])]
                    if null else None),
      "per_seed": per_seed}


def text_table(rows: list[dict]) -> str:
  """Fixed-width columns, every key of any row in first-seen order; None
  or a missing key prints as '-'."""
  if not rows:
    return "(no rows)"
  headers = list(dict.fromkeys(h for r in rows for h in r))
  cells = [["-" if r.get(h) is None else str(r.get(h)) for h in headers]
           for r in rows]
  widths = [max(len(h), *(len(c[i]) for c in cells))
            for i, h in enumerate(headers)]
  lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
  lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
  return "\n".join(lines)

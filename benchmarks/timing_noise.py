"""Timing noise: the same candidates' speedups measured again and again.

Per task: the A/A comparison (the reference timed against itself, as
`KernelEnv.calibrate` does), the task's solution, and a slower correct
variant (its first BLOCK constant divided by 4: four times the grid steps).
Each is measured --repeats times through the environment; the table shows
the spread of the raw speedups against the calibrated noise band (the run
config's calibration) and the share of repeats outside it (for A/A: how
often noise alone would count as a speedup). On a CPU host the kernels run
in Pallas interpret mode: these numbers measure the interpreter. Last stdout
line: one JSON object.

  python benchmarks/timing_noise.py [--repeats=10] [--tasks=level1/vector_add]
  python benchmarks/timing_noise.py --quick   # small sizes, about 20 s
"""

import dataclasses
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402
import numpy as np  # noqa: E402

import kernels_pallas  # noqa: E402
from leap_jax.env import candidate  # noqa: E402
from leap_jax.env import environment  # noqa: E402
from leap_jax.env import settings  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs", "leap.py"))
_TASKS = flags.DEFINE_list("tasks", ["level1/vector_add", "level1/relu"],
                           "Task ids.")
_REPEATS = flags.DEFINE_integer("repeats", 10, "Measurements per candidate.")
_QUICK = flags.DEFINE_bool(
    "quick", False, "Small sizes: 2 repeats of level1/vector_add, 6 timing "
    "rounds of at most 2 s, one A/A run per calibration task.")

# The first value of the first module-level BLOCK... assignment.
_BLOCK_RE = re.compile(r"^(BLOCK\w*(?:, *\w+)* = )([^,#\n]+)", re.MULTILINE)


def slower(source: str) -> str | None:
  """The solution with a quarter of its first block size; None if it has none."""
  if not _BLOCK_RE.search(source):
    return None
  return _BLOCK_RE.sub(lambda m: f"{m[1]}({m[2].strip()}) // 4 ", source, 1)


def aa_ratios(env: environment.KernelEnv, task_id: str, repeats: int) -> list[float]:
  """`repeats` A/A medians of one task; the env's bands are left as they were."""
  saved = env.config, env.band, env.task_bands
  env.config = dataclasses.replace(env.config, calibration_tasks=(task_id,),
                                   calibration_repeats=repeats)
  try:
    env.calibrate()
    return list(env.calibration_ratios)
  finally:
    env.config, env.band, env.task_bands = saved


def candidate_runs(env, task_id: str, source: str, repeats: int):
  """(raw speedups, relative CI widths, statuses) of `repeats` evaluations."""
  verdicts = env.evaluate([(task_id, candidate.fence(source))] * repeats,
                          timing_on=True)
  timed = [v.timing for v in verdicts if v.timing is not None]
  return ([t.raw_speedup for t in timed],
          [(t.ci_high - t.ci_low) / t.raw_speedup for t in timed],
          sorted({v.status.value for v in verdicts}))


def summary(task_id: str, name: str, raw, ci_widths, band: float,
            statuses=("ok",)) -> dict:
  """One table row: spread of the raw speedups against the band."""
  row = {"task": task_id, "candidate": name, "n": len(raw),
         "statuses": list(statuses), "raw": [round(r, 4) for r in raw]}
  if not raw:
    return row
  logs = np.log(np.asarray(raw))
  q1, q3 = np.quantile(raw, [0.25, 0.75])
  row.update(
      median=float(np.median(raw)), min=float(min(raw)), max=float(max(raw)),
      spread=float(max(raw) / min(raw)), iqr=float(q3 - q1),
      ci_width=float(np.median(ci_widths)) if ci_widths else None,
      outside_band=float(np.mean(np.abs(logs) > band)))
  return row


def _fmt(row: dict, key: str, pattern: str) -> str:
  value = row.get(key)
  return "-" if value is None else format(value, pattern)


def print_table(rows, band: float, where: str) -> None:
  print(f"noise band +-{100 * band:.1f}% (calibrated: q95 |log ratio| of the "
        f"run config's A/A runs); timings in {where}")
  width = max(len(r["task"]) for r in rows) + 2
  print(f"{'task':<{width}}{'candidate':<10}{'n':>4}{'median':>9}{'min':>8}"
        f"{'max':>8}{'max/min':>9}{'IQR':>8}{'CI width':>10}{'outside':>9}")
  for r in rows:
    print(f"{r['task']:<{width}}{r['candidate']:<10}{r['n']:>4}"
          f"{_fmt(r, 'median', '.3f'):>9}{_fmt(r, 'min', '.3f'):>8}"
          f"{_fmt(r, 'max', '.3f'):>8}{_fmt(r, 'spread', '.3f'):>9}"
          f"{_fmt(r, 'iqr', '.3f'):>8}{_fmt(r, 'ci_width', '.1%'):>10}"
          f"{_fmt(r, 'outside_band', '.0%'):>9}"
          + ("" if r["statuses"] == ["ok"] else f"  {r['statuses']}"))
  print("CI width: median of (ci_high - ci_low) / speedup (A/A runs report "
        "no CI); outside: share of repeats with |log speedup| > band")


def main(argv):
  del argv
  cfg, repeats, tasks = _CONFIG.value.env, _REPEATS.value, _TASKS.value
  if _QUICK.value:
    cfg.update(timing_rounds=6, timing_max_seconds=2.0, calibration_repeats=1)
    repeats, tasks = 2, ["level1/vector_add"]
  with environment.KernelEnv(settings.env_config_from(cfg)) as env:
    band = env.calibrate()
    calibration = list(env.calibration_ratios)
    rows = []
    for task_id in tasks:
      rows.append(summary(task_id, "A/A", aa_ratios(env, task_id, repeats),
                          [], band))
      source = kernels_pallas.get_task(task_id).solution_candidate_source
      for name, src in (("solution", source), ("slower", slower(source))):
        if src is not None:
          raw, widths, statuses = candidate_runs(env, task_id, src, repeats)
          rows.append(summary(task_id, name, raw, widths, band, statuses))
    where = "Pallas interpret mode on CPU" if env.interpret else "GPU"
  print_table(rows, band, where)
  print(json.dumps({"band": band, "calibration_ratios": calibration,
                    "repeats": repeats, "interpret": env.interpret,
                    "rows": rows}))


if __name__ == "__main__":
  app.run(main)

"""PNG plots of a run from its metrics rows (written at the end of training).

acc.png: Acc@t per step, one curve per turn t; with evaluations during
  training, their Acc@t dashed (held-out tasks, no pruning).
budgets.png: how many prompts got each turn budget, over the whole run.
phases.png: seconds per step in rollout sampling, environment, update and
  evaluation.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a display
from matplotlib import pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402


def _series(rows: Sequence[Mapping[str, Any]], key: str):
  pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
  return [p[0] for p in pts], [p[1] for p in pts]


def write_plots(rows: Sequence[Mapping[str, Any]], turns: int,
                out_dir: str | os.PathLike) -> list[str]:
  """Writes the three PNGs; returns their paths ([] without rows)."""
  if not rows:
    return []
  os.makedirs(out_dir, exist_ok=True)
  paths = []

  fig, ax = plt.subplots(figsize=(6, 4))
  evaluated = any("eval/acc@1" in r for r in rows)
  for t in range(1, turns + 1):
    line, = ax.plot(*_series(rows, f"acc@{t}"), marker=".",
                    label=f"Acc@{t} (training prompts, pruned)")
    if evaluated:
      ax.plot(*_series(rows, f"eval/acc@{t}"), marker="o", linestyle="--",
              color=line.get_color(), label=f"eval Acc@{t} (no pruning)")
  ax.set(xlabel="step", ylabel="share of trajectories solved",
         title="Acc@t: training prompts" + (" and evaluation" if evaluated
                                            else ""), ylim=(-0.02, 1.02))
  ax.legend(fontsize="small")
  paths.append(_save(fig, out_dir, "acc.png"))

  counts = collections.Counter(b for r in rows for b in r.get("budgets") or [])
  fig, ax = plt.subplots(figsize=(5, 4))
  budgets = list(range(1, turns + 1))
  ax.bar([str(b) for b in budgets], [counts.get(b, 0) for b in budgets])
  ax.set(xlabel="turn budget", ylabel="prompts",
         title="DCP turn budgets (all steps)")
  paths.append(_save(fig, out_dir, "budgets.png"))

  fig, ax = plt.subplots(figsize=(6, 4))
  bottom: dict[int, float] = {}  # stacked so far, per step (eval: some steps)
  for phase in ("rollout", "env", "update", "eval"):
    steps, secs = _series(rows, f"seconds_{phase}")
    if not steps:
      continue
    ax.bar(steps, secs, bottom=[bottom.get(st, 0.0) for st in steps],
           label=phase)
    for st, sec in zip(steps, secs):
      bottom[st] = bottom.get(st, 0.0) + sec
  ax.set(xlabel="step", ylabel="seconds", title="Time per step by phase")
  ax.legend()
  paths.append(_save(fig, out_dir, "phases.png"))
  return paths


def _save(fig, out_dir, name: str) -> str:
  path = os.path.join(out_dir, name)
  for ax in fig.axes:
    if ax.get_xlabel() == "step":
      ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path

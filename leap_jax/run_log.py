"""A run's outputs per step: metrics.jsonl, TensorBoard events, a console line.

metrics.jsonl holds one JSON object per finished step, flushed and fsynced
as it is written, so a crash loses at most the step in flight. On resume,
lines past the restored checkpoint's step are dropped (that work is redone).
TensorBoard (and W&B, when asked) get the row's numbers, dicts flattened
(`scalars`). Only the writing process (process 0 on a cluster) creates any
file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_metrics(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """The metrics lines of a run, in order (a torn last line is skipped)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  rows = []
  with open(path) as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        break  # the line being written when the process died
  return rows


def truncate_after(workdir: str | os.PathLike, step: int) -> int:
  """Keeps lines with `step` <= step; returns how many were dropped."""
  rows = read_metrics(workdir)
  keep = [r for r in rows if r.get("step", 0) <= step]
  path = os.path.join(workdir, METRICS_FILE)
  if os.path.exists(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in keep)
    os.replace(tmp, path)
  return len(rows) - len(keep)


def _json_value(v: Any) -> Any:
  return json_safe(float(v) if not isinstance(v, (str, list, dict)) else v)


def json_safe(obj: Any) -> Any:
  """NaN and inf become null at any depth (strict JSON has neither)."""
  if isinstance(obj, dict):
    return {k: json_safe(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [json_safe(v) for v in obj]
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  return obj


def scalars(row: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
  """The row's numbers for TensorBoard / W&B: dicts flattened with '/'
  (statuses {'ok': 3} -> statuses/ok), lists, text and nulls left out."""
  out: dict[str, float] = {}
  for key, value in row.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping):
      out.update(scalars(value, name + "/"))
    elif isinstance(value, (bool, int, float)) and math.isfinite(value):
      out[name] = float(value)
  return out


class RunLog:
  """Appends step metrics to metrics.jsonl, TensorBoard and any extra
  scalar writers (`.write(step, scalars)`, `.close()`), when writing."""

  def __init__(self, workdir: str | os.PathLike, writer: bool = True,
               tensorboard: bool = True, sinks: Sequence[Any] = ()):
    self.workdir, self.writer = os.fspath(workdir), writer
    self._tb = None
    self.sinks = list(sinks) if writer else []
    if writer:
      os.makedirs(self.workdir, exist_ok=True)
      if tensorboard:
        self._open_tensorboard()

  def _open_tensorboard(self, purge_step: int | None = None) -> None:
    from tensorboardX import SummaryWriter  # only the writer needs it
    self._tb = SummaryWriter(os.path.join(self.workdir, "tensorboard"),
                             flush_secs=10, purge_step=purge_step)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.writer:
      return
    row = {"step": int(step), **{k: _json_value(v) for k, v in metrics.items()}}
    with open(os.path.join(self.workdir, METRICS_FILE), "a") as f:
      f.write(json.dumps(row) + "\n")
      f.flush()
      os.fsync(f.fileno())
    numbers = scalars({k: v for k, v in row.items() if k != "step"})
    if self._tb is not None:
      for key, value in numbers.items():
        self._tb.add_scalar(key, value, step)
    for sink in self.sinks:
      sink.write(step, numbers)

  def purge_after(self, step: int) -> None:
    """TensorBoard: hide events past `step` (the resumed run redoes them)."""
    if self._tb is not None:
      self._tb.close()
      self._open_tensorboard(purge_step=step + 1)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None
    for sink in self.sinks:
      sink.close()
    self.sinks = []


def progress_line(step: int, num_steps: int, metrics: Mapping[str, Any],
                  turns: int, eta_s: float | None) -> str:
  """step 3/24 | acc@1 0.25 acc@2 0.31 acc@3 0.34 | active 2/4 | ..."""
  accs = " ".join(f"acc@{t} {metrics.get(f'acc@{t}', float('nan')):.2f}"
                  for t in range(1, turns + 1))
  phases = " ".join(f"{name} {metrics.get('seconds_' + name, 0.0):.1f}s"
                    for name in ("rollout", "env", "update"))
  eta = "" if eta_s is None else f" | ETA {_duration(eta_s)}"
  skipped = ("" if "tasks_skipped" not in metrics
             else f" | skipped {metrics['tasks_skipped']} settled task(s)")
  return (f"step {step}/{num_steps} | {accs} | activated "
          f"{metrics.get('activated_groups', 0.0):.2f}{skipped} | "
          f"{phases}{eta}")


def _duration(seconds: float) -> str:
  seconds = max(0, int(round(seconds)))
  return f"{seconds // 60}m{seconds % 60:02d}s"


def mean_of(rows: Iterable[Mapping[str, Any]], key: str) -> float:
  vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
  return sum(vals) / len(vals) if vals else float("nan")

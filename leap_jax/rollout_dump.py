"""What the policy wrote: rollouts of a step as gzipped JSON lines.

`workdir/rollouts/step_N.jsonl.gz` holds one object per trajectory turn:
step, task, p, g, turn (1-based), prompt_tokens, answer (the text), tokens
(generated, stop token included), cut (ended at max_new_tokens without a
stop token), status, feedback, speedup, reward (`rollout.turn_rewards`) and
advantage (what the update used). A file is written whole and renamed, so
a redone step (after a resume) replaces its dump; `purge_after` removes the
dumps of steps past a restored checkpoint. In a multi-process run each
process makes the rows of its own prompts (texts never leave it otherwise)
and process 0 writes them all. `launch/show_rollouts.py` prints them.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import textwrap
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from leap_jax import run_log

if TYPE_CHECKING:  # reading a dump (show_rollouts.py) never imports jax
  from leap_jax.rl.rollout import Rollout

DIRECTORY = "rollouts"
_NAME = re.compile(r"step_(\d+)\.jsonl\.gz$")


def path_of(workdir: str | os.PathLike, step: int) -> str:
  return os.path.join(workdir, DIRECTORY, f"step_{step}.jsonl.gz")


def is_cut(token_ids: Sequence[int], max_new_tokens: int,
           stop_token_ids: Collection[int]) -> bool:
  """The answer ran into max_new_tokens: no stop token at its end."""
  return (len(token_ids) >= max_new_tokens
          and not (token_ids and token_ids[-1] in stop_token_ids))


def _number(x: Any) -> float | None:
  return None if x is None or not np.isfinite(x) else round(float(x), 6)


def rows(ro: "Rollout", r_PGT: np.ndarray, adv_PGT: np.ndarray, step: int,
         max_new_tokens: int, stop_token_ids: Collection[int],
         p_offset: int = 0) -> list[dict[str, Any]]:
  """One row per turn record of `ro` (this process's rollout, whose prompt
  p is p + p_offset in the merged r_PGT / adv_PGT)."""
  out = []
  for rec in ro.records:
    p = rec.p + p_offset
    ids = list(rec.completion.token_ids)
    verdict = rec.verdict
    out.append({
        "step": step, "task": ro.task_ids[rec.p], "p": p, "g": rec.g,
        "turn": rec.t + 1, "prompt_tokens": len(rec.prompt_ids),
        "answer": rec.completion.text, "tokens": len(ids),
        "cut": is_cut(ids, max_new_tokens, stop_token_ids),
        "status": str(getattr(verdict.status, "value", verdict.status)),
        "feedback": getattr(verdict, "feedback", ""),
        "speedup": _number(getattr(verdict, "speedup", None)),
        "reward": _number(r_PGT[p, rec.g, rec.t]),
        "advantage": _number(adv_PGT[p, rec.g, rec.t]),
    })
  return out


def gather(local_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Every process's rows, in process order (a collective)."""
  from leap_jax import distributed  # pylint: disable=g-import-not-at-top
  if not distributed.is_multiprocess():
    return local_rows
  parts = distributed.allgather_bytes(gzip.compress(
      "\n".join(json.dumps(r) for r in local_rows).encode()))
  return [json.loads(line) for part in parts
          for line in gzip.decompress(part).decode().splitlines() if line]


def write(workdir: str | os.PathLike, step: int,
          step_rows: list[dict[str, Any]]) -> str:
  """rollouts/step_N.jsonl.gz, replacing any earlier one; returns its path."""
  path = path_of(workdir, step)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = path + ".tmp"
  with gzip.open(tmp, "wt", encoding="utf-8") as f:
    for row in step_rows:
      f.write(json.dumps(run_log.json_safe(row)) + "\n")
  os.replace(tmp, path)
  return path


def steps(workdir: str | os.PathLike) -> list[int]:
  directory = os.path.join(workdir, DIRECTORY)
  if not os.path.isdir(directory):
    return []
  return sorted(int(m.group(1)) for name in os.listdir(directory)
                if (m := _NAME.match(name)))


def purge_after(workdir: str | os.PathLike, step: int) -> list[int]:
  """Removes the dumps of steps past `step` (redone on resume)."""
  gone = [s for s in steps(workdir) if s > step]
  for s in gone:
    os.remove(path_of(workdir, s))
  return gone


def read(workdir: str | os.PathLike, step: int) -> list[dict[str, Any]]:
  path = path_of(workdir, step)
  if not os.path.exists(path):
    have = steps(workdir)
    raise FileNotFoundError(
        f"no rollouts of step {step} in {workdir} (steps there: "
        f"{_ranges(have) if have else 'none'})")
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def _ranges(values: list[int]) -> str:
  return f"{values[0]}-{values[-1]}" if len(values) > 2 else ", ".join(
      map(str, values))


def select(step_rows: list[dict[str, Any]], task: str | None = None,
           status: str | None = None) -> list[dict[str, Any]]:
  """Rows of one task (id or level prefix) and/or one status, in
  trajectory order."""
  keep = [r for r in step_rows
          if (not task or r["task"] == task
              or r["task"].startswith(task.rstrip("/") + "/"))
          and (not status or r["status"] == status)]
  return sorted(keep, key=lambda r: (r["p"], r["g"], r["turn"]))


def _signed(x: float | None) -> str:
  return "-" if x is None else f"{x + 0.0:+.3f}"  # + 0.0: no "-0.000"


def format_rows(step_rows: list[dict[str, Any]], max_chars: int = 0) -> str:
  """A readable listing: one header line per turn, then its answer and
  feedback (cut to max_chars each if > 0)."""
  def body(text: str) -> str:
    if max_chars and len(text) > max_chars:
      text = text[:max_chars] + f"\n[... {len(text) - max_chars} more chars]"
    return textwrap.indent(text.rstrip() or "(empty)", "  ")

  blocks = []
  for r in step_rows:
    speed = "" if r.get("speedup") is None else f" | speedup {r['speedup']:.2f}"
    blocks.append(
        f"== {r['task']} | p{r['p']} g{r['g']} turn {r['turn']} | "
        f"{r['status']} | reward {_signed(r.get('reward'))} advantage "
        f"{_signed(r.get('advantage'))} | {r['tokens']} tokens"
        f"{' (cut at max_new_tokens)' if r.get('cut') else ''}, prompt "
        f"{r['prompt_tokens']}{speed}\n-- answer\n{body(r['answer'])}\n"
        f"-- feedback\n{body(r.get('feedback') or '')}")
  return "\n\n".join(blocks)


def summary_line(step: int, step_rows: list[dict[str, Any]],
                 shown: int) -> str:
  counts: dict[str, int] = {}
  for r in step_rows:
    counts[r["status"]] = counts.get(r["status"], 0) + 1
  statuses = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
  tasks = len({r["task"] for r in step_rows})
  return (f"step {step}: {len(step_rows)} turns of {tasks} task(s) "
          f"({statuses}); showing {shown}")


def first_turn_tally(step_rows: list[dict[str, Any]]
                     ) -> dict[str, tuple[int, int]]:
  """task -> (turn-1 answers judged ok, turn-1 answers), over the rows of
  any number of steps."""
  tally: dict[str, tuple[int, int]] = {}
  for r in step_rows:
    if r["turn"] == 1:
      ok, n = tally.get(r["task"], (0, 0))
      tally[r["task"]] = (ok + (r["status"] == "ok"), n + 1)
  return tally

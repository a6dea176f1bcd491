"""Rollouts across processes: to bytes and back, and merged along P.

In a multi-process run each process rolls out its own prompts; the parts
are gathered as bytes (plain arrays and JSON, never pickle) and merged in
process order, so every process computes the same rewards and batch. A
merged record keeps what the trainer reads: ids, sampler logprobs and the
verdict's status, correctness and speedup (not the texts).
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from leap_jax import distributed
from leap_jax.rl.rollout import Completion, Rollout, TurnRecord


@dataclasses.dataclass(frozen=True)
class GatheredVerdict:
  status: str
  correct: bool
  speedup: float | None


def _status(verdict: Any) -> str:
  return str(getattr(verdict.status, "value", verdict.status))


def encode(ro: Rollout, extra: dict[str, Any] | None = None) -> bytes:
  """The rollout (and a JSON-able `extra`) as bytes."""
  recs = ro.records
  meta = {"task_ids": list(ro.task_ids), "policy_calls": ro.policy_calls,
          "statuses": [_status(r.verdict) for r in recs],
          "extra": extra or {}}
  speed = [np.nan if r.verdict.speedup is None else r.verdict.speedup
           for r in recs]
  arrays = {
      "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
      "ok": ro.ok_PGT, "active": ro.active_PGT, "budgets": ro.budgets_P,
      "speedup": ro.speedup_PGT, "dropped": ro.dropped_PG,
      "log_speed": ro.log_speed_PGT, "speed_noise": ro.speed_noise_PGT,
      "pgt": np.array([(r.p, r.g, r.t) for r in recs], np.int32).reshape(-1, 3),
      "prompt_lens": np.array([len(r.prompt_ids) for r in recs], np.int64),
      "prompt_ids": np.array([i for r in recs for i in r.prompt_ids], np.int32),
      "comp_lens": np.array([len(r.completion.token_ids) for r in recs],
                            np.int64),
      "comp_ids": np.array([i for r in recs for i in r.completion.token_ids],
                           np.int32),
      "comp_logps": np.concatenate(
          [np.asarray(r.completion.logprobs, np.float32) for r in recs]
          or [np.zeros((0,), np.float32)]),
      "correct": np.array([bool(r.verdict.correct) for r in recs], bool),
      "record_speedup": np.array(speed, np.float64),
  }
  out = io.BytesIO()
  np.savez(out, **arrays)
  return out.getvalue()


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
  return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


def decode(payload: bytes) -> tuple[Rollout, dict[str, Any]]:
  """encode's inverse: (rollout, extra)."""
  with np.load(io.BytesIO(payload), allow_pickle=False) as z:
    a = {k: z[k] for k in z.files}
  meta = json.loads(a["meta"].tobytes().decode())
  prompts = _split(a["prompt_ids"], a["prompt_lens"])
  comps = _split(a["comp_ids"], a["comp_lens"])
  logps = _split(a["comp_logps"], a["comp_lens"])
  records = []
  for i, (p, g, t) in enumerate(a["pgt"].tolist()):
    s = float(a["record_speedup"][i])
    verdict = GatheredVerdict(meta["statuses"][i], bool(a["correct"][i]),
                              None if np.isnan(s) else s)
    records.append(TurnRecord(p, g, t, prompts[i].tolist(),
                              Completion(comps[i].tolist(), logps[i], ""),
                              verdict))
  ro = Rollout(meta["task_ids"], records, a["ok"], a["active"], a["budgets"],
               a["speedup"], int(meta["policy_calls"]), a["dropped"],
               a["log_speed"], a["speed_noise"])
  return ro, meta["extra"]


def gather(ro: Rollout, extra: dict[str, Any]
           ) -> tuple[Rollout, list[dict[str, Any]]]:
  """Every process's rollout merged in process order, and every process's
  `extra`; one process keeps its own (no bytes round trip)."""
  if not distributed.is_multiprocess():
    return ro, [extra]
  parts = [decode(b) for b in distributed.allgather_bytes(encode(ro, extra))]
  return merge([part for part, _ in parts]), [e for _, e in parts]


def merge(parts: Sequence[Rollout]) -> Rollout:
  """One rollout over all parts' prompts, in order (p offset per part)."""
  if len(parts) == 1:
    return parts[0]
  records, offset = [], 0
  for part in parts:
    records += [dataclasses.replace(r, p=r.p + offset) for r in part.records]
    offset += len(part.task_ids)
  cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
  return Rollout([t for p in parts for t in p.task_ids], records,
                 cat("ok_PGT"), cat("active_PGT"), cat("budgets_P"),
                 cat("speedup_PGT"), max(p.policy_calls for p in parts),
                 cat("dropped_PG"), cat("log_speed_PGT"),
                 cat("speed_noise_PGT"))

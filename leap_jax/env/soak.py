"""Soak and fault injection: mixed candidates while workers are SIGKILLed.

`soak()` sends correct, wrong, malformed and hostile answers (the files of
tests/env/adversarial/) through `KernelEnv.evaluate` in batches while a
killer thread SIGKILLs random worker processes in the middle of their
candidate, and counts what came back: one verdict per candidate, the
expected status for each (kills must not change a verdict: a killed worker's
candidate is retried), no `harness_error`, the pool back to full size, and a
fresh correct candidate still `ok` afterwards. `mixed_batch` is the same
mixture for the throughput benchmark.

  python benchmarks/soak.py --num=200 --hostile=0.2
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import random
import re
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
from leap_jax.env.verdict import Status

TASKS = ("level1/vector_add", "level1/relu", "level1/row_sum", "level1/matmul")
HOSTILE_TASK = "level1/vector_add"  # every file in tests/env/adversarial/
# One cycle of the benign mixture: half correct, then each way to fail.
KINDS = ("correct", "correct", "correct", "syntax_error", "correct", "wrong",
         "no_kernel", "forbidden", "correct", "no_code")
_EXPECT = {"correct": Status.OK, "wrong": Status.WRONG_OUTPUT,
           "no_kernel": Status.NO_KERNEL, "forbidden": Status.FORBIDDEN,
           "syntax_error": Status.SYNTAX_ERROR, "no_code": Status.NO_CODE}
_EXPECT_RE = re.compile(r"^# expect:\s*(.*)$", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One model answer and the statuses it may honestly get."""
  task_id: str
  answer: str
  kind: str                     # a KINDS entry, or hostile:<file name>
  expect: frozenset[Status]


def benign(kind: str, task_id: str) -> Candidate:
  """A correct answer for `task_id`, or one broken in the way `kind` says."""
  source = kernels_pallas.get_task(task_id).solution_candidate_source
  if kind == "wrong":  # plausible wrong kernel: the output scaled by 0.5
    source = source.replace("o_ref[...] =", "o_ref[...] = 0.5 *", 1)
  elif kind == "no_kernel":
    source = "import jax.numpy as jnp\n\ndef kernel(*xs):\n  return xs[0]\n"
  elif kind == "forbidden":
    source = "import os\n\ndef kernel(*xs):\n  return os.getpid()\n"
  elif kind == "syntax_error":
    source = "def kernel(x:\n"
  answer = ("I could not write this kernel." if kind == "no_code"
            else candidate.fence(source))
  return Candidate(task_id, answer, kind, frozenset({_EXPECT[kind]}))


def mixed_batch(n: int) -> list[tuple[str, str]]:
  """n (task_id, answer) pairs: the benign mixture, no hostile answers."""
  return [(c.task_id, c.answer) for c in mixed_candidates(n)]


def load_hostile(directory: str | os.PathLike, sentinel_dir: str,
                 port: int = 9) -> list[Candidate]:
  """The adversarial answers; those that get past the static screen (and so
  reach a worker) first. SENTINEL_DIR and PORT are filled in."""
  out = []
  for path in sorted(pathlib.Path(directory).glob("*.md")):
    text = path.read_text()
    expect = _EXPECT_RE.search(text)
    if expect is None:
      raise ValueError(f"{path}: no '# expect:' line")
    text = text.replace("SENTINEL_DIR", sentinel_dir).replace("PORT", str(port))
    statuses = frozenset(Status(s.strip()) for s in expect.group(1).split("|"))
    out.append(Candidate(HOSTILE_TASK, text, f"hostile:{path.stem}", statuses))
  # The accept_* cases probe the allowlist's relaxed rules; the process-level
  # attacks (loops, bombs, floods) come first among those reaching a worker.
  return sorted(out, key=lambda c: (_screened_out(c.answer),
                                    c.kind.startswith("hostile:accept_")))


def _screened_out(answer: str) -> bool:
  source = candidate.extract_code(answer)
  return source is None or screen.screen_source(source).status is not None


def mixed_candidates(n: int, hostile: Sequence[Candidate] = (),
                     hostile_share: float = 0.0, seed: int = 0
                     ) -> list[Candidate]:
  """n candidates over TASKS; round(n * hostile_share) of them, at seeded
  random places, are the hostile ones in turn."""
  count = round(n * hostile_share) if hostile else 0
  hostile_at = set(random.Random(seed).sample(range(n), count))
  out, benign_i, hostile_i = [], 0, 0
  for i in range(n):
    if i in hostile_at:
      out.append(hostile[hostile_i % len(hostile)])
      hostile_i += 1
    else:
      out.append(benign(KINDS[benign_i % len(KINDS)],
                        TASKS[benign_i % len(TASKS)]))
      benign_i += 1
  return out


def tagged(c: Candidate, index: int) -> Candidate:
  """The answer with a comment naming it, so its worker can be told apart
  (the pool sees only sources); answers without code stay as they are."""
  source = candidate.extract_code(c.answer)
  if source is None:
    return c
  answer = candidate.fence(f"{source.rstrip()}\n# soak candidate {index}\n")
  return dataclasses.replace(c, answer=answer)


class PoolTap:
  """Watches a live pool from outside, by wrapping two of its methods on the
  instance: which worker process runs which source and in which phase, how
  often each source was tried, and the seconds workers spent in candidate
  phases (after the worker confirmed the job: exec, trace, checks, trials,
  judging; before it, the candidate waits for a worker to be ready)."""

  def __init__(self, pool: pool_lib.WorkerPool):
    self._pool = pool
    self._lock = threading.Lock()
    self._converse_inner = pool._converse
    self._phase_inner = pool._candidate_phase
    self.attempts: collections.Counter[str] = collections.Counter()
    self.running: dict[int, tuple[str, int]] = {}  # pidfd -> (source, pid)
    self.in_candidate: set[int] = set()            # pids
    self.candidate_seconds = 0.0
    self.first_job: float | None = None            # monotonic
    self.kills: collections.Counter[str] = collections.Counter()  # by phase
    pool._converse = self._converse
    pool._candidate_phase = self._candidate_phase

  def close(self) -> None:
    del self._pool._converse, self._pool._candidate_phase

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def _converse(self, slot, w, job, judge, *rest):
    source = job.get("source", "")
    with self._lock:
      self.first_job = self.first_job or time.monotonic()
    try:  # a pidfd: a kill can never reach a reused pid
      fd = os.pidfd_open(w.process.pid) if w.wait_spawned(60) else None
    except OSError:
      fd = None
    with self._lock:
      self.attempts[source] += 1
      if fd is not None:
        self.running[fd] = (source, w.process.pid)
    try:
      return self._converse_inner(slot, w, job, judge, *rest)
    finally:
      if fd is not None:
        with self._lock:
          del self.running[fd]
          os.close(fd)

  def _candidate_phase(self, w, job, judge, *rest):
    start = time.monotonic()
    with self._lock:
      self.in_candidate.add(w.process.pid)
    try:
      return self._phase_inner(w, job, judge, *rest)
    finally:
      with self._lock:
        self.in_candidate.discard(w.process.pid)
        self.candidate_seconds += time.monotonic() - start

  def kill_one(self, rng: random.Random, phase: str) -> bool:
    """SIGKILLs a random worker that runs a candidate's first attempt in
    `phase` (startup: before the worker confirmed the job; candidate: after).

    The pool retries a fault once; a candidate killed on both attempts is
    `crashed` by design, so each candidate is killed at most once here.
    """
    with self._lock:
      targets = sorted(
          fd for fd, (src, pid) in self.running.items()
          if self.attempts[src] == 1
          and (pid in self.in_candidate) == (phase == "candidate"))
      if not targets:
        return False
      try:
        signal.pidfd_send_signal(rng.choice(targets), signal.SIGKILL)
      except ProcessLookupError:
        return False
      self.kills[phase] += 1
      return True


class Killer(threading.Thread):
  """Every uniform(0, 2 * mean_gap_s) seconds kills a random running worker,
  in the startup and candidate phases in turn (waiting for one in that phase)."""

  PHASES = ("candidate", "startup")

  def __init__(self, tap: PoolTap, mean_gap_s: float, seed: int = 0):
    super().__init__(name="soak-killer", daemon=True)
    self._tap, self._gap = tap, mean_gap_s
    self._rng = random.Random(seed)
    self._done = threading.Event()

  def run(self) -> None:
    turn = 0
    while not self._done.wait(self._rng.uniform(0, 2 * self._gap)):
      while not self._tap.kill_one(self._rng, self.PHASES[turn % 2]):
        if self._done.wait(0.02):
          return
      turn += 1

  def stop(self) -> None:
    self._done.set()
    self.join()


def _unexpected(cands, verdicts) -> list[dict[str, Any]]:
  return [{"index": i, "kind": c.kind, "status": v.status.value,
           "expect": sorted(s.value for s in c.expect), "detail": v.detail[-200:]}
          for i, (c, v) in enumerate(zip(cands, verdicts))
          if v is not None and v.status not in c.expect]


def _tally(verdicts) -> dict[str, int]:
  return dict(sorted(collections.Counter(
      v.status.value for v in verdicts if v is not None).items()))


def _by_kind(cands, verdicts) -> dict[str, dict[str, int]]:
  kinds = sorted({c.kind.split(":")[0] for c in cands})
  return {k: _tally(v for c, v in zip(cands, verdicts)
                    if c.kind.split(":")[0] == k) for k in kinds}


def _evaluate_in_batches(env, cands, batch_size: int):
  """(one verdict or None per candidate, verdicts beyond one per candidate)."""
  verdicts, extra = [], 0
  for b in range(0, len(cands), batch_size):
    chunk = cands[b:b + batch_size]
    got = env.evaluate([(c.task_id, c.answer) for c in chunk])
    verdicts += got[:len(chunk)] + [None] * (len(chunk) - len(got))
    extra += max(0, len(got) - len(chunk))
  return verdicts, extra


def _verdict_counts(cands, verdicts, extra: int) -> dict[str, Any]:
  statuses = _tally(verdicts)
  correct = [v for c, v in zip(cands, verdicts) if c.kind == "correct"]
  unexpected = _unexpected(cands, verdicts)
  return {
      "candidates": len(cands),
      "hostile": sum(c.kind.startswith("hostile") for c in cands),
      "verdicts": sum(v is not None for v in verdicts),
      "missing": sum(v is None for v in verdicts),
      "duplicates": extra,
      "misattributed": sum(v is not None and v.task_id != c.task_id
                           for c, v in zip(cands, verdicts)),
      "statuses": statuses,
      "by_kind": _by_kind(cands, verdicts),
      "correct": len(correct),
      "correct_ok": sum(v is not None and v.correct for v in correct),
      "unexpected": len(unexpected),
      "unexpected_examples": unexpected[:5],
      "harness_error": statuses.get(Status.HARNESS_ERROR.value, 0),
  }


def run_soak(env: environment.KernelEnv, cands: Sequence[Candidate],
             batch_size: int = 16, kill_every_s: float = 2.0,
             seed: int = 0) -> dict[str, Any]:
  """Evaluates `cands` in batches under the killer; the counts."""
  cands = [tagged(c, i) for i, c in enumerate(cands)]
  env.pool.prestart()
  live_before, faults_before = env.pool.live_workers(), env.pool.harness_faults
  start = time.monotonic()
  with PoolTap(env.pool) as tap:
    killer = Killer(tap, kill_every_s, seed)
    killer.start()
    try:
      verdicts, extra = _evaluate_in_batches(env, cands, batch_size)
    finally:
      killer.stop()
  seconds = time.monotonic() - start
  sources = [candidate.extract_code(c.answer) for c in cands]
  retried = [v for s, v in zip(sources, verdicts)
             if s is not None and tap.attempts[s] > 1]
  return {
      **_verdict_counts(cands, verdicts, extra),
      "harness_faults": env.pool.harness_faults - faults_before,
      "kills": sum(tap.kills.values()),
      "kills_by_phase": dict(sorted(tap.kills.items())),
      "retried": len(retried),
      "retried_ended_as": _tally(retried),
      "pool_size": env.pool.size,
      "live_before": live_before,
      "live_after": env.pool.live_workers(),
      "seconds": round(seconds, 1),
      "candidates_per_s": round(len(cands) / seconds, 3),
  }


def soak(num: int, hostile_share: float, hostile_dir: str | os.PathLike,
         workers: int = 2, deadline_s: float = 20.0, batch_size: int = 16,
         kill_every_s: float = 2.0, seed: int = 0) -> dict[str, Any]:
  """The whole soak on a fresh pool of `workers`: counts, plus whether the
  same environment then still judges a fresh correct candidate `ok` and
  whether any hostile answer wrote outside its sandbox."""
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=workers, deadline_s=deadline_s))
  with tempfile.TemporaryDirectory(prefix="leap_soak_") as sentinel, \
       environment.KernelEnv(config) as env:
    hostile = load_hostile(hostile_dir, sentinel)
    cands = mixed_candidates(num, hostile, hostile_share, seed)
    counts = run_soak(env, cands, batch_size, kill_every_s, seed)
    (after,) = env.evaluate([(TASKS[0], benign("correct", TASKS[0]).answer)])
    counts["after_soak"] = after.status.value
    counts["sentinel_files"] = sum(1 for _ in pathlib.Path(sentinel).rglob("*"))
    counts["live_end"] = env.pool.live_workers()
  return counts


def problems(counts: dict[str, Any]) -> list[str]:
  """The soak's invariants that do not hold (empty: all hold)."""
  checks = {
      "one verdict per candidate": counts["verdicts"] == counts["candidates"]
      and counts["missing"] == counts["duplicates"] == counts["misattributed"] == 0,
      "every verdict as expected": counts["unexpected"] == 0,
      "correct candidates ok": counts["correct_ok"] == counts["correct"],
      "no harness_error": counts["harness_error"] == 0,
      "pool back to full size": counts["live_after"] == counts["pool_size"]
      == counts["live_before"],
      "env alive after the soak": counts.get("after_soak", "ok") == "ok",
      "no writes outside the sandbox": counts.get("sentinel_files", 0) == 0,
  }
  return [name for name, ok in checks.items() if not ok]

"""A pool of sandboxed worker processes: one fresh process per candidate.

Each slot keeps one pre-started worker (forked from a forkserver that has jax
imported); with cores to spare its start-up overlaps the current candidate,
otherwise it follows it. The pool owns
deadlines, process-group kills, respawn and the order of results; it never
unpickles anything a worker sends.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from leap_jax.env import allowlist
from leap_jax.env import wire
from leap_jax.env import worker as worker_lib
from leap_jax.env.verdict import Status

_LOG = logging.getLogger(__name__)

ALLOWED_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64",
                            "int32", "int64", "int8", "int16", "uint8",
                            "uint32", "bool"})


# Statuses a worker may report about its own candidate. A worker runs
# untrusted code, so `ok` only ever comes from the judge and `harness_error`
# only from the pool.
_WORKER_STATUSES = {s.value: s for s in (
    Status.MISSING_ENTRY_POINT, Status.FORBIDDEN, Status.NO_KERNEL,
    Status.COMPUTE_OUTSIDE_KERNEL, Status.LOWERING_ERROR,
    Status.RUNTIME_ERROR)}


@dataclasses.dataclass(frozen=True)
class PoolConfig:
  num_workers: int = 0                 # 0: one per core
  start_method: str = "forkserver"     # forkserver | spawn
  deadline_s: float = 60.0             # exec, trace, lower and run the trials
  timing_deadline_s: float = 60.0
  startup_deadline_s: float = 120.0    # worker import and warm-up
  max_output_bytes: int = 1 << 30
  setups: tuple[worker_lib.WorkerSetup, ...] = ()  # one per slot; default CPU

  def worker_count(self) -> int:
    return self.num_workers or len(self.setups) or os.cpu_count() or 1


@dataclasses.dataclass
class Outcome:
  """What the conversation with one worker produced."""
  status: Status | None = None       # set when the worker or pool decided
  detail: str = ""
  judged: Any = None                 # whatever the judge returned
  timing: dict[str, Any] | None = None
  seconds: float = 0.0


# judge(header, arrays) -> (judgement, want_timing)
Judge = Callable[[dict[str, Any], list[Any]], tuple[Any, bool]]


class _HarnessFault(Exception):
  """The pool or worker failed before the candidate ran: not the model's."""


class _Killed(_HarnessFault):
  """The worker was SIGKILLed mid-candidate, not by the pool (an operator,
  the OOM killer): retried; `crashed` if the retry is killed too."""


class _Worker:
  """One worker process and its private pipe."""

  def __init__(self, ctx, setup: worker_lib.WorkerSetup):
    self.conn, child_conn = ctx.Pipe(duplex=True)
    self.process = ctx.Process(target=worker_lib.main,
                               args=(child_conn, setup), daemon=True)
    self.process.start()
    child_conn.close()
    self.setup = setup
    self.ready = False
    self.jobs_done = 0

  def receive(self, deadline_s: float, max_bytes: int) -> dict[str, Any] | None:
    """A message, or None when the deadline passes; EOFError if it died."""
    if not self.conn.poll(max(0.0, deadline_s)):
      return None
    message = self.conn.recv_bytes(max_bytes)
    header, arrays = wire.decode(message, ALLOWED_DTYPES)
    header["_arrays"] = arrays
    return header

  def kill(self) -> None:
    try:
      os.killpg(self.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, TypeError):
      pass
    try:
      self.process.kill()
    except (ProcessLookupError, AttributeError):
      pass
    self.process.join(timeout=10)
    self.conn.close()


class WorkerPool:
  """Runs candidate jobs on fresh sandboxed processes, results in order."""

  def __init__(self, config: PoolConfig):
    self.config = config
    self._ctx = multiprocessing.get_context(config.start_method)
    if config.start_method == "forkserver":
      # The allow-listed modules too: each worker's warm-up then finds them
      # loaded instead of importing them again (about a second per worker).
      self._ctx.set_forkserver_preload(
          ["leap_jax.env.worker", *sorted(allowlist.ALLOWED_MODULES)])
    n = config.worker_count()
    setups = config.setups or tuple(worker_lib.WorkerSetup() for _ in range(n))
    if len(setups) != n:
      raise ValueError(f"{len(setups)} worker setups for {n} workers")
    self._slots: queue.Queue[int] = queue.Queue()
    self._setups = setups
    self._spare: list[_Worker | None] = [None] * n
    self._lock = threading.Lock()
    for i in range(n):
      self._slots.put(i)
    self._executor = concurrent.futures.ThreadPoolExecutor(
        n, thread_name_prefix="leap-env")
    # A successor started early only helps if a core is free for its
    # start-up (GPU hosts: a few workers, many cores); with a worker per
    # core (the CPU default) it would only compete with the candidates.
    self._early_successors = 2 * n <= (os.cpu_count() or 1)
    self.harness_faults = 0
    self.network_isolated: bool | None = None  # known after the first job

  @property
  def size(self) -> int:
    return len(self._setups)

  def live_workers(self) -> int:
    return sum(w is not None and w.process.is_alive() for w in self._spare)

  def prestart(self) -> None:
    """Starts every slot's worker now (otherwise on first use)."""
    with self._lock:
      for slot in range(self.size):
        if self._spare[slot] is None:
          self._spare[slot] = _Worker(self._ctx, self._setups[slot])

  def _take(self, slot: int, early_successor: bool) -> _Worker:
    """The slot's pre-started (or recycled) worker.

    early_successor: a one-job worker's successor starts now, so its
    start-up (~1.5 s on CPU) overlaps this candidate instead of delaying the
    next one. Not for timed jobs: a starting process (on a GPU, a second
    context warming up on the device) would add noise to the timing.
    """
    setup = self._setups[slot]
    with self._lock:
      w = self._spare[slot]
      self._spare[slot] = None
    try:
      w = w if w is not None else _Worker(self._ctx, setup)
      if early_successor and setup.jobs_per_worker == 1:
        successor = _Worker(self._ctx, setup)
        with self._lock:
          self._spare[slot] = successor
    except OSError as e:  # fork/forkserver failure: ours, not the model's
      if w is not None:
        w.kill()
      raise _HarnessFault(f"could not start a worker: {e!r}") from None
    return w

  def _release(self, slot: int, w: _Worker, reusable: bool) -> None:
    """Keeps a recycled worker, or kills it; the slot gets a live spare."""
    if reusable and w.jobs_done < w.setup.jobs_per_worker and w.process.is_alive():
      with self._lock:
        self._spare[slot] = w
      return
    w.kill()
    with self._lock:
      spare = self._spare[slot]
      if spare is None or not spare.process.is_alive():
        self._spare[slot] = _Worker(self._ctx, self._setups[slot])

  def run(self, jobs: Sequence[dict[str, Any]],
          judges: Sequence[Judge | None]) -> list[Outcome]:
    """Runs every job; outcome i belongs to job i."""
    futures = [self._executor.submit(self._run_with_retry, job, judge)
               for job, judge in zip(jobs, judges, strict=True)]
    return [f.result() for f in futures]

  def _run_with_retry(self, job, judge) -> Outcome:
    timed = job.get("reference_export") is not None
    faults = []
    for attempt in range(2):  # a harness fault is retried once
      slot = self._slots.get()
      start = time.monotonic()
      try:
        outcome = self._converse(
            slot, self._take(slot, self._early_successors and not timed),
            job, judge)
        outcome.seconds = time.monotonic() - start
        return outcome
      except _HarnessFault as e:
        with self._lock:
          self.harness_faults += 1
        _LOG.warning("harness fault (attempt %d): %s", attempt + 1, e)
        faults.append(e)
      finally:
        self._slots.put(slot)
    # Killed on both tries: as likely the candidate's own doing (the OOM
    # killer) as bad luck, so a crash; harness_error is never the model's.
    killed = all(isinstance(e, _Killed) for e in faults)
    return Outcome(status=Status.CRASHED if killed else Status.HARNESS_ERROR,
                   detail=str(faults[-1]), seconds=time.monotonic() - start)

  def _converse(self, slot: int, w: _Worker, job, judge) -> Outcome:
    cfg = self.config
    reusable = False
    try:
      try:
        if not w.ready:
          ready = w.receive(cfg.startup_deadline_s, wire.MAX_HEADER_BYTES)
          if ready is None or ready.get("kind") != "ready":
            raise _HarnessFault(
                f"worker not ready: {ready and ready.get('kind')}")
          w.ready = True
        w.jobs_done += 1
        w.conn.send(job)
        started = w.receive(cfg.startup_deadline_s, wire.MAX_HEADER_BYTES)
        if started is None or started.get("kind") != "started":
          raise _HarnessFault("worker did not start the job")
        self._note_isolation(bool(started.get("network_isolated")))
      except (EOFError, OSError, wire.WireError) as e:
        raise _HarnessFault(f"worker failed before the candidate ran: {e!r}")
      outcome = self._candidate_phase(w, job, judge)
      reusable = outcome.status not in (Status.TIMEOUT, Status.CRASHED)
      return outcome
    finally:
      self._release(slot, w, reusable)

  def _note_isolation(self, isolated: bool) -> None:
    if self.network_isolated is None:
      self.network_isolated = isolated
      _LOG.log(logging.INFO if isolated else logging.WARNING,
               "worker network: %s", "own empty namespace" if isolated else
               "NOT isolated (unshare not permitted; audit hook only)")

  def _candidate_phase(self, w: _Worker, job, judge) -> Outcome:
    cfg = self.config
    try:
      # Per task (the reference outputs' bytes times trials, plus a header):
      # a flood is refused at its length prefix, never read.
      message = w.receive(cfg.deadline_s,
                          job.get("max_message_bytes", cfg.max_output_bytes))
      if message is None:
        return Outcome(Status.TIMEOUT, f"No result within {cfg.deadline_s:.0f} s.")
      if message.get("kind") == "verdict":
        status = _WORKER_STATUSES.get(message.get("status"))
        if status is None:  # ok is the judge's word, harness_error the pool's
          return Outcome(Status.CRASHED, "Malformed verdict from the worker.")
        return Outcome(status, str(message.get("detail", "")))
      if message.get("kind") == "timing" and job.get("aa_calibration"):
        return Outcome(timing=message)
      if message.get("kind") != "outputs" or judge is None:
        return Outcome(Status.CRASHED, "Unexpected message from the worker.")
      judged, want_timing = judge(message, message["_arrays"])
      w.conn.send({"time": want_timing})
      if not want_timing:
        return Outcome(judged=judged)
      timed = w.receive(cfg.timing_deadline_s, wire.MAX_HEADER_BYTES)
      if timed is not None and timed.get("status") == Status.FORBIDDEN.value:
        # jax's state changed while timing: the candidate's doing.
        return Outcome(Status.FORBIDDEN, str(timed.get("detail", "")))
      if timed is None or timed.get("kind") != "timing":
        return Outcome(judged=judged, detail="timing failed")
      return Outcome(judged=judged, timing=timed)
    except (EOFError, ConnectionResetError, BrokenPipeError):
      w.process.join(timeout=5)
      code = w.process.exitcode
      if code == -signal.SIGKILL:  # the pool kills only after an outcome
        raise _Killed(f"The process was killed (code {code}).") from None
      return Outcome(Status.CRASHED, f"The process exited (code {code}).")
    except wire.WireError as e:
      return Outcome(Status.CRASHED, f"Malformed result: {e}.")
    except OSError as e:  # recv_bytes over max_output_bytes
      return Outcome(Status.WRONG_OUTPUT, f"Output too large: {e}.")

  def close(self) -> None:
    # Queued jobs are cancelled first, so no later _take starts a worker
    # that nobody would kill.
    self._executor.shutdown(wait=True, cancel_futures=True)
    with self._lock:
      spares, self._spare = self._spare, [None] * len(self._spare)
    for w in spares:
      if w is not None:
        w.kill()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

"""A pool of sandboxed worker processes: one fresh process per candidate.

Each slot keeps one pre-started worker (forked by the zygote, see
zygote.py); with cores to spare its start-up overlaps the current candidate,
otherwise it follows it. Each slot belongs to a device (a GPU id; on CPU
hosts each slot is its own): jobs share their device, timing has it alone
(device_gate.py). The pool owns deadlines, process-group kills, respawn,
scratch dirs and the order of results; it never unpickles anything a worker
sends.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import itertools
import logging
import os
import queue
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from leap_jax.env import compile_cache
from leap_jax.env import device_gate
from leap_jax.env import jail
from leap_jax.env import shared_inputs
from leap_jax.env import wire
from leap_jax.env import worker as worker_lib
from leap_jax.env import worker_process
from leap_jax.env import zygote as zygote_lib
from leap_jax.env.verdict import Status

_LOG = logging.getLogger(__name__)

ALLOWED_DTYPES = worker_process.ALLOWED_DTYPES

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
  start_method: str = "zygote"         # zygote | forkserver | spawn
  deadline_s: float = 60.0             # exec, trace, lower and run the trials
  timing_deadline_s: float = 60.0
  startup_deadline_s: float = 120.0    # worker start-up (zygote: its preload)
  max_output_bytes: int = 1 << 30
  setups: tuple[worker_lib.WorkerSetup, ...] = ()  # one per slot; default CPU
  jail: jail.JailConfig = jail.JailConfig()
  share_warm_up: bool = True           # zygote: compile the warm-up once

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


def slot_device(setup: worker_lib.WorkerSetup, slot: int) -> str:
  """The device a slot's jobs hold: its GPU, or (CPU workers) its own."""
  return setup.visible_device if setup.visible_device is not None else (
      f"cpu-slot-{slot}")


class WorkerPool:
  """Runs candidate jobs on fresh sandboxed processes, results in order."""

  def __init__(self, config: PoolConfig):
    self.config = config
    n = config.worker_count()
    setups = config.setups or tuple(worker_lib.WorkerSetup() for _ in range(n))
    if len(setups) != n:
      raise ValueError(f"{len(setups)} worker setups for {n} workers")
    self._setups = setups
    # A recycled worker (trusted code) is confined after its first job: its
    # audit hook refuses the socket and mmap a memfd needs, so its jobs
    # carry their inputs.
    self._share_inputs = all(s.jobs_per_worker == 1 for s in setups)
    self._devices = [slot_device(s, i) for i, s in enumerate(setups)]
    self.gate = device_gate.DeviceGate()
    self._scratch_root = tempfile.mkdtemp(prefix="leap_env_")
    os.chmod(self._scratch_root, 0o711)  # an unprivileged worker passes through
    self._starter = worker_process.make_starter(config.start_method,
                                                config.jail)
    self._slots: queue.Queue[int] = queue.Queue()
    self._spare: list[worker_process.WorkerProcess | None] = [None] * n
    self._startup_holds: dict[int, device_gate.Hold] = {}
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
    self.jail_report: dict[str, Any] | None = None  # from the first job
    self.lives: collections.deque[worker_process.WorkerLife] = (
        collections.deque(maxlen=10_000))
    self._alive: set[worker_process.WorkerProcess] = set()
    self._job_ids = itertools.count()
    self.warm_up_entries: int | None = None  # shared compiled programs
    self.warm_up_shared = threading.Event()  # set once tried (see entries)
    if config.share_warm_up and config.start_method == "zygote":
      threading.Thread(target=self._share_warm_up, name="leap-env-warmer",
                       daemon=True).start()
    else:
      self.warm_up_shared.set()

  @property
  def size(self) -> int:
    return len(self._setups)

  def live_workers(self) -> int:
    return sum(w is not None and w.alive() for w in self._spare)

  def _new_worker(self, slot: int, spare: bool) -> worker_process.WorkerProcess | None:
    """A worker for `slot`. A spare's start-up holds its device (it may not
    start while a candidate is timed there): None if that must wait."""
    hold = None
    if spare:
      hold = self.gate.try_enter(self._devices[slot], f"start-up {slot}")
      if hold is None:
        return None
    def started_up(_, hold=hold):
      if hold is not None:
        self.gate.leave(hold)
    try:
      w = worker_process.WorkerProcess(
          self._starter, self._setups[slot], self.config.jail,
          self._scratch_root, self.config.startup_deadline_s, started_up,
          self._gone)
    except BaseException:
      started_up(None)
      raise
    with self._lock:
      if not w.gone:  # (a start that failed at once is gone already)
        self._alive.add(w)
    return w

  def _share_warm_up(self) -> None:
    """A warmer compiles the warm-up's programs; workers forked after it
    load them instead of compiling (compile_cache.py). Workers started
    before then, or after a failure here, compile as before."""
    setup = dataclasses.replace(self._setups[0], fill_compile_cache=True)
    def gone(w):
      with self._lock:
        self._alive.discard(w)
    w = worker_process.WorkerProcess(
        self._starter, setup, self.config.jail, self._scratch_root,
        self.config.startup_deadline_s, on_gone=gone)
    with self._lock:
      if not w.gone:
        self._alive.add(w)
    try:
      error = w.wait_ready(self.config.startup_deadline_s)
      if error:
        raise compile_cache.CacheError(error)
      message = w.receive(self.config.startup_deadline_s,
                          wire.message_cap(compile_cache.MAX_TOTAL_BYTES))
      if message is None:
        raise compile_cache.CacheError("the warmer sent no entries in time")
      arrays = message.pop("_arrays")
      self._starter.zygote.give_compile_cache(
          compile_cache.validate(message, arrays))
      self.warm_up_entries = len(arrays)
      _LOG.info("warm-up: %d compiled program file(s) shared with later "
                "workers", len(arrays))
    except (compile_cache.CacheError, zygote_lib.ZygoteError, EOFError,
            OSError, wire.WireError) as e:
      _LOG.warning("warm-up programs not shared (each worker compiles "
                   "them): %s", e)
    finally:
      w.kill()
      self.warm_up_shared.set()

  def _gone(self, w: worker_process.WorkerProcess) -> None:
    with self._lock:
      self._alive.discard(w)
      self.lives.append(w.life)

  def prestart(self, wait: bool = False) -> None:
    """Starts every slot's worker now (otherwise on first use); `wait`:
    until each is ready (or failed)."""
    for slot in range(self.size):
      self._fill(slot)
    if wait:
      with self._lock:
        spares = [w for w in self._spare if w is not None]
      for w in spares:
        w.wait_ready(self.config.startup_deadline_s)

  def _fill(self, slot: int) -> None:
    """Gives the slot a live spare if it has none (and its device allows a
    start-up now); a failure to start is left to the slot's next job."""
    with self._lock:
      spare = self._spare[slot]
      if spare is not None and spare.alive():
        return
    try:
      fresh = self._new_worker(slot, spare=True)
    except OSError as e:
      _LOG.warning("could not start a spare worker: %r", e)
      return
    with self._lock:
      old, self._spare[slot] = self._spare[slot], fresh
    if old is not None:
      old.kill()

  def _take(self, slot: int, early_successor: bool) -> worker_process.WorkerProcess:
    """The slot's pre-started (or recycled) worker.

    early_successor: a one-job worker's successor starts now, so its
    start-up overlaps this candidate instead of delaying the next one. Not
    for timed jobs: a starting process (on a GPU, a second context warming
    up on the device) would add noise to the timing.
    """
    setup = self._setups[slot]
    with self._lock:
      w, self._spare[slot] = self._spare[slot], None
    if w is not None and not w.alive():  # died, or its zygote did
      w.kill()
      w = None
    try:
      w = w if w is not None else self._new_worker(slot, spare=False)
      if early_successor and setup.jobs_per_worker == 1:
        successor = self._new_worker(slot, spare=True)
        with self._lock:
          self._spare[slot] = successor
    except OSError as e:  # fork/zygote failure: ours, not the model's
      if w is not None:
        w.kill()
      raise _HarnessFault(f"could not start a worker: {e!r}") from None
    w.life.taken = time.monotonic()
    return w

  def _release(self, slot: int, w: worker_process.WorkerProcess,
               reusable: bool) -> None:
    """Keeps a recycled worker, or kills it; the slot gets a live spare
    unless its device is being timed (then its next job starts one)."""
    w.life.outcome = time.monotonic()
    if reusable and w.jobs_done < w.setup.jobs_per_worker and w.alive():
      with self._lock:
        self._spare[slot] = w
      return
    w.kill()
    self._fill(slot)

  def run(self, jobs: Sequence[dict[str, Any]],
          judges: Sequence[Judge | None]) -> list[Outcome]:
    """Runs every job; outcome i belongs to job i."""
    with shared_inputs.SharedInputs() as shared:
      pack = shared.pack if self._share_inputs else (lambda job: (job, []))
      futures = [self._executor.submit(self._run_with_retry, *pack(job),
                                       judge)
                 for job, judge in zip(jobs, judges, strict=True)]
      return [f.result() for f in futures]

  def _run_with_retry(self, job, fds: list[int], judge) -> Outcome:
    timed = job.get("reference_export") is not None
    faults = []
    for attempt in range(2):  # a harness fault is retried once
      slot = self._slots.get()
      start = time.monotonic()
      hold = self.gate.enter(self._devices[slot], f"job {next(self._job_ids)}")
      try:
        # A calibration job times from its first message: alone throughout.
        with (self._alone(hold) if job.get("aa_calibration")
              else contextlib.nullcontext()):
          outcome = self._converse(
              slot, self._take(slot, self._early_successors and not timed),
              job, judge, hold, fds)
        outcome.seconds = time.monotonic() - start
        return outcome
      except _HarnessFault as e:
        with self._lock:
          self.harness_faults += 1
        _LOG.warning("harness fault (attempt %d): %s", attempt + 1, e)
        faults.append(e)
      finally:
        self.gate.leave(hold)
        self._slots.put(slot)
    # Killed on both tries: as likely the candidate's own doing (the OOM
    # killer) as bad luck, so a crash; harness_error is never the model's.
    killed = all(isinstance(e, _Killed) for e in faults)
    return Outcome(status=Status.CRASHED if killed else Status.HARNESS_ERROR,
                   detail=str(faults[-1]), seconds=time.monotonic() - start)

  def _converse(self, slot: int, w, job, judge,
                hold: device_gate.Hold | None = None, fds=()) -> Outcome:
    cfg = self.config
    reusable = False
    try:
      try:
        problem = w.wait_ready(cfg.startup_deadline_s)
        if problem:
          raise _HarnessFault(problem)
        w.jobs_done += 1
        shared_inputs.send_job(w.conn, job, list(fds))
        started = w.receive(cfg.startup_deadline_s, wire.MAX_HEADER_BYTES)
        if started is None or started.get("kind") != "started":
          raise _HarnessFault("worker did not start the job")
        w.life.started = time.monotonic()
        self._note_jail(started.get("jail"))
      except (EOFError, OSError, wire.WireError) as e:
        raise _HarnessFault(f"worker failed before the candidate ran: {e!r}")
      outcome = self._candidate_phase(w, job, judge, hold)
      reusable = outcome.status not in (Status.TIMEOUT, Status.CRASHED)
      return outcome
    finally:
      self._release(slot, w, reusable)

  def _note_jail(self, report: Any) -> None:
    if self.jail_report is not None or not isinstance(report, dict):
      return
    self.jail_report = report
    try:
      line = jail.JailReport(**report).summary()
    except TypeError:
      line = f"worker OS layer: unreadable report {report!r}"
    _LOG.log(logging.WARNING if report.get("missing") else logging.INFO,
             "%s", line)

  def _candidate_phase(self, w, job, judge,
                       hold: device_gate.Hold | None = None) -> Outcome:
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
      if not want_timing:
        w.conn.send({"time": False})
        return Outcome(judged=judged)
      with self._alone(hold):
        w.conn.send({"time": True})
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

  def _alone(self, hold: device_gate.Hold | None):
    """No other job or start-up on this job's device for the body."""
    if hold is None:
      return contextlib.nullcontext()
    return self.gate.exclusive(hold)

  def close(self) -> None:
    # Queued jobs are cancelled first, so no later _take starts a worker
    # that nobody would kill.
    self._executor.shutdown(wait=True, cancel_futures=True)
    with self._lock:
      self._spare = [None] * len(self._spare)
      alive = list(self._alive)
    for w in alive:
      w.kill(wait=True)
    self._starter.close()
    worker_process.remove_tree(self._scratch_root)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

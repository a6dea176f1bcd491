"""The pool's handle on one worker process: how it starts, its private
socket, its scratch dir and the times of its life.

Starters: the zygote (default: a fork of a clean, preloaded process) or a
multiprocessing context (`forkserver`: the stdlib forkserver with the worker
module imported, the pre-zygote path; `spawn`: a fresh interpreter per
worker). A thread per worker waits for its `ready` message, so a start-up is
seen to end when it ends. After an outcome the worker is SIGKILLed; once it
is gone its scratch dir is removed, whatever it did.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from leap_jax.env import jail
from leap_jax.env import wire
from leap_jax.env import worker as worker_lib
from leap_jax.env import zygote as zygote_lib

ALLOWED_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64",
                            "int32", "int64", "int8", "int16", "uint8",
                            "uint32", "bool"})
_SERIAL = itertools.count()
_LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class WorkerLife:
  """Monotonic times (seconds, one clock for every process on the host)."""
  requested: float                 # the pool asked for the process
  forked_at: float | None = None   # the zygote forked it
  entered: float | None = None     # worker.main began
  jailed: float | None = None      # OS layer done
  ready: float | None = None       # backend up, `ready` sent
  taken: float | None = None       # a job took it
  started: float | None = None     # confined, job confirmed
  outcome: float | None = None     # the pool had its outcome
  killed: float | None = None
  gone: float | None = None        # reaped and its scratch removed

  def phases(self) -> dict[str, float]:
    """Seconds per phase; phases it never reached are left out. `idle`: a
    ready worker waited for a job; `wait`: a job waited for its worker's
    start-up (the start-up it could not hide)."""
    t = dataclasses.asdict(self)
    spans = {"fork": ("requested", "entered"), "jail": ("entered", "jailed"),
             "backend": ("jailed", "ready"), "idle": ("ready", "taken"),
             "wait": ("taken", "ready"), "job": ("started", "outcome"),
             "teardown": ("outcome", "gone")}
    out = {name: t[b] - t[a] for name, (a, b) in spans.items()
           if t[a] is not None and t[b] is not None}
    out = {name: max(0.0, seconds) for name, seconds in out.items()}
    if None not in (self.taken, self.ready, self.started):
      out["confine"] = max(0.0, self.started - max(self.taken, self.ready))
    return out


def remove_tree(path: str) -> None:
  """Removes path whatever a worker did to the modes below it."""
  def force(function, failed, _):
    try:
      os.chmod(os.path.dirname(failed), 0o700)
      os.chmod(failed, 0o700)
      function(failed)
    except OSError:
      pass
  try:
    shutil.rmtree(path, onerror=force)
  except FileNotFoundError:
    pass


class _ZygoteStarter:
  """Forks workers from the pool's zygote; a zygote that died (the OOM
  killer, an operator) is replaced, once per failure, with a warning."""

  def __init__(self, env: dict[str, str]):
    self._env = env
    self._lock = threading.Lock()
    self._closed = False
    self.zygote = zygote_lib.Zygote(env)

  def _current(self) -> zygote_lib.Zygote:
    with self._lock:
      if self._closed:  # a closed pool's zygote is not replaced
        raise zygote_lib.ZygoteError("the pool is closed")
      if not self.zygote.alive():
        _LOG.warning("the zygote exited; starting a new one")
        self.zygote.close()
        self.zygote = zygote_lib.Zygote(self._env)
      return self.zygote

  def start(self, setup, jail_config, scratch) -> tuple[Any, Connection]:
    zygote = None
    try:
      zygote = self._current()
      return self._spawn(zygote, setup, jail_config, scratch)
    except zygote_lib.ZygoteError as e:
      if zygote is None or zygote.alive():
        raise OSError(str(e)) from None
    # It died with this start in flight (a pool refills its spares right
    # after each job, so one often is): its successor makes the worker.
    try:
      return self._spawn(self._current(), setup, jail_config, scratch)
    except zygote_lib.ZygoteError as e:
      raise OSError(str(e)) from None

  @staticmethod
  def _spawn(zygote, setup, jail_config, scratch) -> tuple[Any, Connection]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
      child = zygote.spawn(dataclasses.asdict(setup),
                           dataclasses.asdict(jail_config), scratch,
                           theirs.fileno())
    except BaseException:
      ours.close()
      raise
    finally:
      theirs.close()
    return child, Connection(ours.detach())

  def close(self) -> None:
    with self._lock:
      self._closed = True
      self.zygote.close()


class _MultiprocessingStarter:
  def __init__(self, ctx):
    self.ctx = ctx

  def start(self, setup, jail_config, scratch) -> tuple[Any, Connection]:
    conn, child_conn = self.ctx.Pipe(duplex=True)
    process = self.ctx.Process(
        target=worker_lib.main, daemon=True,
        args=(child_conn, setup, scratch, jail_config))
    process.start()
    child_conn.close()
    return process, conn

  def close(self) -> None:
    pass


def make_starter(start_method: str, jail_config: jail.JailConfig):
  if start_method == "zygote":
    return _ZygoteStarter(jail.minimal_environment(os.environ,
                                                   jail_config.passthrough))
  import multiprocessing  # noqa: PLC0415
  if start_method not in ("forkserver", "spawn"):
    raise ValueError("env start_method must be zygote, forkserver or spawn, "
                     f"got {start_method!r}")
  ctx = multiprocessing.get_context(start_method)
  if start_method == "forkserver":
    # The allow-listed modules too: each worker's warm-up then finds them
    # loaded instead of importing them again (about a second per worker).
    from leap_jax.env import allowlist  # noqa: PLC0415
    ctx.set_forkserver_preload(
        ["leap_jax.env.worker", *sorted(allowlist.ALLOWED_MODULES)])
  return _MultiprocessingStarter(ctx)


class WorkerProcess:
  """One worker, its private socket and scratch dir.

  Made at once: the process is started (and its `ready` awaited) by a
  thread of its own, so whoever asks for a worker never waits for a fork.
  """

  def __init__(self, starter, setup: worker_lib.WorkerSetup,
               jail_config: jail.JailConfig, scratch_root: str,
               startup_deadline_s: float,
               on_ready: Callable[[WorkerProcess], None] = lambda w: None,
               on_gone: Callable[[WorkerProcess], None] = lambda w: None):
    self.setup = setup
    self.life = WorkerLife(requested=time.monotonic())
    self.scratch = os.path.join(scratch_root, f"w{next(_SERIAL)}")
    os.mkdir(self.scratch, 0o700)
    self.process: Any = None   # set once started
    self.conn: Connection | None = None
    self.jobs_done = 0
    self.ready_error: str | None = None
    self._lock = threading.Lock()
    self._spawned = threading.Event()
    self._ready = threading.Event()
    self._gone = threading.Event()
    self._kill_asked = False
    self._on_ready, self._on_gone = on_ready, on_gone
    threading.Thread(target=self._start, name="leap-env-start", daemon=True,
                     args=(starter, jail_config, startup_deadline_s)).start()

  def _start(self, starter, jail_config, deadline_s: float) -> None:
    try:
      process, conn = starter.start(self.setup, jail_config, self.scratch)
    except OSError as e:  # fork or zygote failure: ours, not the model's
      self.ready_error = f"could not start a worker: {e!r}"
      self._spawned.set()
      self._started_up()
      self._cleanup()
      return
    with self._lock:
      self.process, self.conn = process, conn
      kill = self._kill_asked
    self._spawned.set()
    if kill:
      self._kill_now()
    self._wait_ready(deadline_s)

  def receive(self, deadline_s: float, max_bytes: int) -> dict[str, Any] | None:
    """A message, or None when the deadline passes; EOFError if it died."""
    if not self.conn.poll(max(0.0, deadline_s)):
      return None
    message = self.conn.recv_bytes(max_bytes)
    header, arrays = wire.decode(message, ALLOWED_DTYPES)
    header["_arrays"] = arrays
    return header

  def _wait_ready(self, deadline_s: float) -> None:
    try:
      ready = self.receive(deadline_s, wire.MAX_HEADER_BYTES)
      if ready is None or ready.get("kind") != "ready":
        self.ready_error = f"worker not ready: {ready and ready.get('kind')}"
      else:
        self.life.ready = time.monotonic()
        for key in ("forked_at", "entered", "jailed"):
          value = ready.get(key)
          setattr(self.life, key, value if isinstance(value, float) else None)
    except (EOFError, OSError, wire.WireError) as e:
      self.ready_error = f"worker failed while starting: {e!r}"
    finally:
      self._started_up()

  def _started_up(self) -> None:
    self._ready.set()
    self._on_ready(self)

  def wait_spawned(self, timeout_s: float) -> bool:
    """True once the process exists (it may have failed to, see ready_error)."""
    return self._spawned.wait(timeout_s) and self.process is not None

  def wait_ready(self, timeout_s: float) -> str | None:
    """None once ready; otherwise what went wrong."""
    if not self._ready.wait(timeout_s):
      return "worker not ready before the start-up deadline"
    return self.ready_error

  @property
  def started_up(self) -> bool:
    return self._ready.is_set()

  @property
  def gone(self) -> bool:
    return self._gone.is_set()

  def alive(self) -> bool:
    """Starting, or running; False once dead or failed to start."""
    with self._lock:
      if self.process is None:
        return not self._spawned.is_set()
      return self.process.is_alive()

  def kill(self, wait: bool = False) -> None:
    """SIGKILL to its process group; its scratch removed once it is gone
    (now for multiprocessing workers, when the zygote reaps it otherwise)."""
    self.life.killed = time.monotonic()
    with self._lock:
      self._kill_asked = True
      spawned = self.process is not None
    if spawned:
      self._kill_now()
    if wait:
      self._spawned.wait(60)
      self._gone.wait(10)

  def _kill_now(self) -> None:
    process = self.process
    if isinstance(process, zygote_lib.Child):
      process.kill()
      process.on_exit(lambda _: self._cleanup())
      return
    try:
      os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, TypeError):
      pass
    try:
      process.kill()
    except (ProcessLookupError, AttributeError):
      pass
    process.join(timeout=10)
    self._cleanup()

  def _cleanup(self) -> None:
    with self._lock:
      if self._gone.is_set():
        return
      self._gone.set()
    self._ready.wait(10)  # its reader sees EOF now; then the fd may close
    if self.conn is not None:
      self.conn.close()
    remove_tree(self.scratch)
    self.life.gone = time.monotonic()
    self._on_gone(self)

"""The zygote: a clean, preloaded process that forks one worker per candidate.

Started by the pool as a fresh interpreter with a minimal fixed environment
(none of the parent's variables, so no worker can ever read them), it runs
`worker.preload` once (imports, a backend-free trace: no XLA client, so no
threads) and then only forks. It refuses to fork while it has more than one
thread. It never runs candidate code and never reads what a worker sends.

Protocol on a SOCK_SEQPACKET pair, one JSON object per packet:
  pool -> zygote   {"op": "spawn", "id", "setup", "jail", "scratch"}
                   + the worker's end of its private socket (SCM_RIGHTS)
                   {"op": "cache"} + a memfd of the warm-up's compiled
                   programs (compile_cache.py), kept for later forks
  zygote -> pool   {"op": "up", "seconds"} once, after the preload
                   {"op": "spawned", "id", "pid"} + a pidfd where the kernel
                   has them (signals then never reach a reused pid)
                   {"op": "failed", "id", "detail"}
                   {"op": "exit", "pid", "code"} (code < 0: killed by -code)
EOF from the pool: the zygote kills its workers' process groups and exits.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from leap_jax.env import compile_cache

_MAX_PACKET = 1 << 16


def _send(sock: socket.socket, message: dict[str, Any], fds=()) -> None:
  socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
  data, fds, _, _ = socket.recv_fds(sock, _MAX_PACKET, 2)
  return (json.loads(data) if data else None), fds


# --- the zygote process -----------------------------------------------------

def serve(fd: int) -> None:
  """The zygote's main loop (run by the command `Zygote` starts)."""
  from leap_jax.env import jail  # noqa: PLC0415  (after sys.path is set)
  from leap_jax.env import worker  # noqa: PLC0415
  start = time.monotonic()
  worker.preload()
  # The preloaded heap moves to a generation the collector never scans, so
  # a worker's collections do not touch (and copy-on-write) all of it.
  gc.freeze()
  sock = socket.socket(fileno=fd)
  _send(sock, {"op": "up", "seconds": time.monotonic() - start})
  wake_r, wake_w = os.pipe()
  os.set_blocking(wake_r, False)
  os.set_blocking(wake_w, False)
  signal.set_wakeup_fd(wake_w)
  signal.signal(signal.SIGCHLD, lambda *_: None)
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  children: set[int] = set()
  selector = selectors.DefaultSelector()
  selector.register(sock, selectors.EVENT_READ)
  selector.register(wake_r, selectors.EVENT_READ)
  while True:
    for key, _ in selector.select():
      if key.fileobj == wake_r:
        os.read(wake_r, 4096)
        _reap(sock, children)
        continue
      message, fds = _recv(sock)
      if message is None:  # the pool is gone
        for pid in children:
          try:
            os.killpg(pid, signal.SIGKILL)
          except OSError:
            pass
        os._exit(0)
      if message.get("op") == "cache":
        compile_cache.keep(fds[0])
        continue
      _spawn(sock, message, fds, children, (sock.fileno(), wake_r, wake_w),
             jail, worker)


def _reap(sock, children: set[int]) -> None:
  while children:
    try:
      pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      return
    if pid == 0:
      return
    children.discard(pid)
    _send(sock, {"op": "exit", "pid": pid,
                 "code": os.waitstatus_to_exitcode(status)})


def _spawn(sock, message, fds, children, own_fds, jail, worker) -> None:
  (conn_fd,) = fds
  threads = jail.thread_count()
  if threads != 1:  # a fork would copy locks held by the other threads
    os.close(conn_fd)
    _send(sock, {"op": "failed", "id": message["id"],
                 "detail": f"zygote has {threads} threads; not forking"})
    return
  forked_at = time.monotonic()
  pid = os.fork()
  if pid == 0:
    code = 1
    try:
      signal.set_wakeup_fd(-1)
      signal.signal(signal.SIGCHLD, signal.SIG_DFL)
      signal.signal(signal.SIGINT, signal.SIG_DFL)
      for fd in own_fds:
        os.close(fd)
      setup = worker.WorkerSetup(**message["setup"])
      jail_config = jail.JailConfig(**{
          k: tuple(v) if isinstance(v, list) else v
          for k, v in message["jail"].items()})
      worker.main(Connection(conn_fd), setup, message["scratch"],
                  jail_config, forked_at=forked_at)
      code = 0
    except BaseException:  # noqa: BLE001  (a harness failure: say what it was)
      traceback.print_exc()
    finally:
      os._exit(code)
  os.close(conn_fd)
  children.add(pid)
  try:
    pidfds = [os.pidfd_open(pid)]
  except (AttributeError, OSError):
    pidfds = []
  _send(sock, {"op": "spawned", "id": message["id"], "pid": pid}, pidfds)
  for fd in pidfds:
    os.close(fd)


# --- the pool's side --------------------------------------------------------

class ZygoteError(RuntimeError):
  """The zygote could not fork a worker (a harness fault, not the model's)."""


class Child:
  """A worker forked by the zygote, shaped like multiprocessing.Process
  where the pool uses it (pid, is_alive, exitcode, join, kill)."""

  def __init__(self, pid: int, pidfd: int | None,
               zygote_alive: Callable[[], bool] = lambda: True):
    self.pid, self._pidfd = pid, pidfd
    self._zygote_alive = zygote_alive
    self.exitcode: int | None = None
    self._exited = threading.Event()   # reaped
    self._settled = threading.Event()  # reaped and its callbacks run
    self._on_exit: list[Callable[[Child], None]] = []
    self._lock = threading.Lock()

  def is_alive(self) -> bool:
    """False once reaped, and once its zygote is dead: the zygote's reader
    kills such a worker when it sees the death, which may be later than a
    pool's next look (a job sent to it meanwhile would be lost)."""
    return not self._exited.is_set() and self._zygote_alive()

  def join(self, timeout: float | None = None) -> None:
    """Returns once it is reaped and its on_exit callbacks have run (they
    run on the zygote's reader thread after the reap)."""
    self._settled.wait(timeout)

  def kill(self) -> None:
    """SIGKILL to the process, then to its process group (it called
    setsid); never once the zygote has reaped it (its pid may be reused),
    and without a pidfd never once the zygote is dead (init reaps it then,
    unseen)."""
    with self._lock:
      if self._exited.is_set():
        return
      try:
        if self._pidfd is not None:  # fails (ESRCH) once it is reaped
          signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        elif self._zygote_alive():
          os.kill(self.pid, signal.SIGKILL)
        else:
          return
        os.killpg(self.pid, signal.SIGKILL)
      except OSError:  # reaped already (ESRCH), or the group is gone
        pass

  def on_exit(self, callback: Callable[[Child], None]) -> None:
    """Runs callback(self) once the zygote has reaped it (now if it has)."""
    with self._lock:
      if not self._exited.is_set():
        self._on_exit.append(callback)
        return
    callback(self)

  def _exit(self, code: int) -> None:
    with self._lock:
      self.exitcode = code
      self._exited.set()
      callbacks, self._on_exit = self._on_exit, []
      if self._pidfd is not None:
        os.close(self._pidfd)
        self._pidfd = None
    try:
      for callback in callbacks:
        callback(self)
    finally:
      self._settled.set()


@dataclasses.dataclass
class _Request:
  done: threading.Event = dataclasses.field(default_factory=threading.Event)
  child: Child | None = None
  error: str = ""


class Zygote:
  """Starts the zygote process (a clean environment, `passthrough` names
  only) and asks it for workers."""

  def __init__(self, env: dict[str, str], up_timeout_s: float = 300.0):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    code = (f"import sys; sys.path[:0] = {sys.path!r}; "
            f"from leap_jax.env import zygote; zygote.serve({theirs.fileno()})")
    # -E -s: no PYTHON* variables, no user site (the path is passed above).
    self._process = subprocess.Popen(
        [sys.executable, "-E", "-s", "-B", "-c", code], env=env,
        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True)
    theirs.close()
    self._sock = ours
    self._lock = threading.Lock()           # one spawn request at a time
    self._state = threading.Condition()
    self._requests: dict[int, _Request] = {}
    self._children: dict[int, Child] = {}
    self._early_exits: dict[int, int] = {}  # exit seen before its spawned
    self._next_id = 0
    self._up = threading.Event()
    self._ended = threading.Event()  # its socket is closed (seen or hit)
    self._closed = False
    self.preload_seconds: float | None = None
    self._up_timeout_s = up_timeout_s
    self._reader = threading.Thread(target=self._read, name="leap-zygote",
                                    daemon=True)
    self._reader.start()

  def _read(self) -> None:
    while True:
      try:
        message, fds = _recv(self._sock)
      except OSError:
        message, fds = None, []
      if message is None:
        break
      op = message["op"]
      if op == "up":
        self.preload_seconds = message["seconds"]
        self._up.set()
      elif op in ("spawned", "failed"):
        with self._state:
          request = self._requests.pop(message["id"])
          if op == "spawned":
            pid = message["pid"]
            request.child = Child(pid, fds[0] if fds else None, self.alive)
            self._children[pid] = request.child
            early = self._early_exits.pop(pid, None)
          else:
            request.error, early = message["detail"], None
        request.done.set()
        if early is not None:
          request.child._exit(early)
      elif op == "exit":
        with self._state:
          child = self._children.pop(message["pid"], None)
          if child is None:
            self._early_exits[message["pid"]] = message["code"]
        if child is not None:
          child._exit(message["code"])
    # The zygote died (or we closed): no worker will ever be reported again.
    self._ended.set()
    self._up.set()
    with self._state:
      children, self._children = list(self._children.values()), {}
      requests, self._requests = list(self._requests.values()), {}
    for child in children:
      child.kill()
      child._exit(-signal.SIGKILL)
    for request in requests:
      request.error = "the zygote exited"
      request.done.set()

  def spawn(self, setup: dict[str, Any], jail: dict[str, Any], scratch: str,
            conn_fd: int, timeout_s: float = 60.0) -> Child:
    """A new worker on conn_fd (which the caller then closes)."""
    if not self._up.wait(self._up_timeout_s) or self.preload_seconds is None:
      raise ZygoteError("the zygote did not finish its preload "
                        f"(exit code {self._process.poll()})")
    with self._lock:
      with self._state:
        if self._closed:
          raise ZygoteError("the pool is closed")
        request_id, self._next_id = self._next_id, self._next_id + 1
        request = self._requests[request_id] = _Request()
      try:
        _send(self._sock, {"op": "spawn", "id": request_id, "setup": setup,
                           "jail": jail, "scratch": scratch}, [conn_fd])
      except OSError as e:
        self._ended.set()  # its end is closed: dead, whatever poll says yet
        raise ZygoteError(f"the zygote is gone: {e!r}") from None
      if not request.done.wait(timeout_s) or request.child is None:
        raise ZygoteError(f"no worker: {request.error or 'no answer'}")
      return request.child

  def give_compile_cache(self, blob: bytes) -> None:
    """The warm-up's compiled programs, for every worker forked after."""
    fd = compile_cache.to_memfd(blob)
    try:
      with self._lock:
        _send(self._sock, {"op": "cache"}, [fd])
    except OSError as e:
      raise ZygoteError(f"the zygote is gone: {e!r}") from None
    finally:
      os.close(fd)

  def alive(self) -> bool:
    return (not self._ended.is_set() and self._process.poll() is None
            and self._reader.is_alive())

  def close(self) -> None:
    with self._state:
      self._closed = True
    try:
      self._sock.shutdown(socket.SHUT_RDWR)
    except OSError:
      pass
    try:
      self._process.wait(timeout=10)
    except subprocess.TimeoutExpired:
      self._process.kill()
      self._process.wait()
    self._reader.join(timeout=10)
    self._sock.close()

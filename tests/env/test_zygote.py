"""The zygote: forks workers from a clean, preloaded process; reports exits."""

import json
import os
import signal
import socket
import threading
import time

import pytest

from leap_jax.env import jail
from leap_jax.env import worker
from leap_jax.env import zygote


@pytest.fixture(scope="module")
def zyg():
  z = zygote.Zygote(jail.minimal_environment(os.environ, ()))
  yield z
  z.close()


def _spawn(z, tmp_path):
  ours, theirs = socket.socketpair()
  scratch = tmp_path / "w"
  scratch.mkdir(exist_ok=True)
  child = z.spawn(dict(worker.WorkerSetup().__dict__),
                  dict(jail.JailConfig().__dict__), str(scratch), theirs.fileno())
  theirs.close()
  return child, ours


def test_join_returns_after_the_exit_callbacks_ran():
  """The reap and its callbacks happen on the zygote's reader thread: join
  waits for both (it returned between them once, and a caller saw no exit
  callback yet)."""
  child = zygote.Child(pid=2**22 + 1, pidfd=None)
  ran = []

  def slow(c):
    time.sleep(0.3)
    ran.append(c)
  child.on_exit(slow)
  reaper = threading.Thread(target=child._exit, args=(-signal.SIGKILL,))
  reaper.start()
  while child.is_alive():  # reaped: the callback is running now
    time.sleep(0.001)
  child.join(10)
  assert ran == [child] and child.exitcode == -signal.SIGKILL
  reaper.join()


def test_a_worker_comes_up_and_its_kill_is_reported(zyg, tmp_path):
  child, sock = _spawn(zyg, tmp_path)
  assert child.is_alive() and child.pid > 0
  sock.settimeout(120)
  assert b'"ready"' in sock.recv(1 << 16)
  gone = []
  child.on_exit(gone.append)
  child.kill()
  child.join(10)
  assert child.exitcode == -signal.SIGKILL and gone == [child]
  child.kill()  # reaped already: never signals a reused pid
  late = []
  child.on_exit(late.append)
  assert late == [child]
  sock.close()


def test_the_zygote_holds_none_of_the_parents_variables(monkeypatch, tmp_path):
  monkeypatch.setenv("LEAP_ZYGOTE_SECRET", "hunter2")
  z = zygote.Zygote(jail.minimal_environment(os.environ, ("LD_LIBRARY_PATH",)))
  try:
    child, sock = _spawn(z, tmp_path)
    for pid in (z._process.pid, child.pid):
      with open(f"/proc/{pid}/environ", "rb") as f:  # the exec-time block
        block = f.read()
      assert b"hunter2" not in block and b"LEAP_ZYGOTE_SECRET" not in block
    child.kill()
    child.join(10)
    sock.close()
  finally:
    z.close()


def test_the_zygote_refuses_to_fork_with_threads():
  ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
  conn_a, conn_b = socket.socketpair()

  class TwoThreads:
    @staticmethod
    def thread_count():
      return 2
  zygote._spawn(theirs, {"id": 7}, [conn_b.detach()], set(), (), TwoThreads, None)
  message = json.loads(ours.recv(1 << 16))
  assert message == {"op": "failed", "id": 7,
                     "detail": "zygote has 2 threads; not forking"}
  for s in (ours, theirs, conn_a):
    s.close()


def test_closing_the_zygote_kills_its_workers(tmp_path):
  z = zygote.Zygote(jail.minimal_environment(os.environ, ()))
  child, sock = _spawn(z, tmp_path)
  z.close()
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline:
    try:
      os.kill(child.pid, 0)
    except ProcessLookupError:
      break
    time.sleep(0.05)
  else:
    pytest.fail(f"worker {child.pid} outlived its zygote")
  sock.close()

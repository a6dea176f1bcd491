"""The pool's handle on a worker: phases of its life, scratch removal."""

import os
import stat

from leap_jax.env import worker_process


def test_phases_from_hand_made_times():
  life = worker_process.WorkerLife(
      requested=10.0, forked_at=10.01, entered=10.02, jailed=10.03,
      ready=10.20, taken=11.0, started=11.05, outcome=12.0, gone=12.1)
  got = {k: round(v, 6) for k, v in life.phases().items()}
  assert got == {"fork": 0.02, "jail": 0.01, "backend": 0.17, "idle": 0.8,
                 "wait": 0.0, "job": 0.95, "teardown": 0.1, "confine": 0.05}


def test_a_job_that_waited_for_start_up_shows_it_as_wait():
  life = worker_process.WorkerLife(requested=0.0, entered=0.1, jailed=0.1,
                                   ready=0.5, taken=0.2, started=0.6)
  phases = life.phases()
  assert phases["wait"] == 0.3 and phases["idle"] == 0.0
  assert abs(phases["confine"] - 0.1) < 1e-9
  assert "job" not in phases and "teardown" not in phases


def test_remove_tree_whatever_the_worker_did_to_the_modes(tmp_path):
  root = tmp_path / "w0"
  (root / "locked" / "deeper").mkdir(parents=True)
  (root / "locked" / "deeper" / "f").write_text("x")
  os.chmod(root / "locked" / "deeper", 0)
  os.chmod(root / "locked", stat.S_IRUSR)
  worker_process.remove_tree(str(root))
  assert not root.exists()
  worker_process.remove_tree(str(root))  # already gone: no error


def test_a_start_in_flight_when_its_zygote_dies_goes_to_the_successor(
    tmp_path):
  """The request reaches a stopped zygote, which is then killed: the start
  is made again by a new zygote instead of failing (a pool refills its
  spares right after each job, so such a start is common). A dead zygote's
  workers count as dead at once, and a closed starter makes no zygote."""
  import signal  # noqa: PLC0415
  import time  # noqa: PLC0415
  from leap_jax.env import jail, worker as worker_lib  # noqa: PLC0415
  config = jail.JailConfig()
  starter = worker_process.make_starter("zygote", config)
  try:
    old = starter.zygote
    first = worker_process.WorkerProcess(starter, worker_lib.WorkerSetup(),
                                         config, str(tmp_path), 120)
    assert first.wait_ready(120) is None
    os.kill(old._process.pid, signal.SIGSTOP)
    w = worker_process.WorkerProcess(starter, worker_lib.WorkerSetup(),
                                     config, str(tmp_path), 120)
    deadline = time.monotonic() + 30
    while not old._requests and time.monotonic() < deadline:
      time.sleep(0.01)
    assert old._requests, "the start never reached the zygote"
    os.kill(old._process.pid, signal.SIGKILL)
    assert w.wait_ready(120) is None, w.ready_error
    assert starter.zygote is not old and w.alive()
    assert not first.alive()  # its zygote is dead: doomed, whatever it is now
    w.kill(wait=True)
    first.kill(wait=True)
  finally:
    starter.close()
  late = worker_process.WorkerProcess(starter, worker_lib.WorkerSetup(),
                                      config, str(tmp_path), 10)
  assert "the pool is closed" in (late.wait_ready(10) or "")
  assert starter.zygote.alive() is False

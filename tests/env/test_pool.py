"""The pool: order, crashes, harness faults, respawn (real worker processes)."""

import logging
import os
import time

import pytest

from leap_jax.env import environment
from leap_jax.env import jail
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
from leap_jax.env import timing as timing_lib
from leap_jax.env import worker_process
from leap_jax.env.verdict import Status
from tests.env.conftest import vector_add

TASK = "level1/vector_add"
# Reachable only with the static screen off: os._exit through the globals of
# os._wrap_close.__init__ (the candidate's typing has no `sys` any more).
CRASH = ("```python\ndef kernel(x, y):\n"
         "  for c in ().__class__.__base__.__subclasses__():\n"
         "    if c.__name__ == '_wrap_close':\n"
         "      c.__init__.__globals__['_exit'](3)\n```")


@pytest.fixture(scope="module")
def env():
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(num_workers=2, deadline_s=15))
  with environment.KernelEnv(config) as kernel_env:
    yield kernel_env


def test_order_is_preserved(env):
  answers = [vector_add(), vector_add("x_ref[...] * y_ref[...]")] * 3
  statuses = [v.status for v in env.evaluate([(TASK, a) for a in answers])]
  assert statuses == [Status.OK, Status.WRONG_OUTPUT] * 3


def test_dead_process_is_crashed_and_pool_recovers(env, monkeypatch):
  monkeypatch.setattr(environment.screen, "screen_source",
                      lambda source: screen.ScreenResult(None))
  crashed, ok = env.evaluate([(TASK, CRASH), (TASK, vector_add())])
  assert crashed.status is Status.CRASHED, crashed.feedback
  assert "code 3" in crashed.detail
  assert ok.status is Status.OK
  assert env.pool.live_workers() == env.pool.size


class _FlakyWorker(worker_process.WorkerProcess):
  """The first `failures` workers made fail their start-up handshake."""
  failures = 0

  def __init__(self, *args, **kwargs):
    self.flaky = type(self).failures > 0
    type(self).failures -= self.flaky
    super().__init__(*args, **kwargs)

  def receive(self, deadline_s, max_bytes):
    if self.flaky and not self.started_up:
      return None
    return super().receive(deadline_s, max_bytes)


@pytest.mark.parametrize("failures,want,faults", [
    (1, Status.OK, 1), (2, Status.HARNESS_ERROR, 2)])
def test_harness_fault_is_retried_once_then_reported(monkeypatch, failures,
                                                     want, faults):
  monkeypatch.setattr(worker_process, "WorkerProcess", _FlakyWorker)
  _FlakyWorker.failures = failures
  # (No warmer: it would be the first worker made.)
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=1, deadline_s=15, share_warm_up=False))
  with environment.KernelEnv(config) as env:
    (verdict,) = env.evaluate([(TASK, vector_add())])
    assert verdict.status is want, verdict.detail
    if want is Status.HARNESS_ERROR:
      assert "not your fault" in verdict.feedback
    assert env.pool.harness_faults == faults


def test_worker_count_defaults_to_cores():
  assert pool_lib.PoolConfig().worker_count() >= 1
  with pytest.raises(ValueError, match="setups"):
    pool_lib.WorkerPool(pool_lib.PoolConfig(num_workers=2, setups=(
        pool_lib.worker_lib.WorkerSetup(),)))


def test_timing_has_its_device_alone_while_checks_share_it():
  """GPU scheduling with fake device ids (CPU workers, as on a GPU host with
  two verification devices and workers_per_device=2): correctness checks
  share a device, a timed candidate never overlaps another job or start-up
  on its device."""
  setups = tuple(pool_lib.worker_lib.WorkerSetup(visible_device=d)
                 for d in ("0", "0", "1", "1"))
  config = environment.EnvConfig(
      pool=pool_lib.PoolConfig(num_workers=4, setups=setups, deadline_s=60),
      timing=True, calibration_tasks=(TASK,), calibration_repeats=2,
      timing_config=timing_lib.TimingConfig(rounds=2, min_rounds=2,
                                            max_seconds=2, warmup_calls=1))
  wrong = vector_add("x_ref[...] * y_ref[...]")
  with environment.KernelEnv(config) as env:
    verdicts = env.evaluate([(TASK, a) for a in [vector_add(), wrong] * 5])
    log = list(env.pool.gate.log)
  assert [v.status for v in verdicts] == [Status.OK, Status.WRONG_OUTPUT] * 5
  assert all(v.timing is not None for v in verdicts[::2])
  exclusive = [i for i in log if i.kind == "exclusive"]
  assert len(exclusive) >= 5 + 2  # five timed candidates, two A/A runs
  for ex in exclusive:
    for i in log:
      if i is not ex and i.device == ex.device:
        assert i.end <= ex.start or i.start >= ex.end, (ex, i)
  shared = [(a, b) for a in log for b in log if a.kind == b.kind == "run"
            and a.who != b.who and not a.who.startswith("start-up")
            and not b.who.startswith("start-up") and a.device == b.device
            and a.start < b.start < a.end]
  assert shared, "no two checks ever shared a device"
  assert {i.device for i in log} == {"0", "1"}


def test_pool_without_the_os_layer_still_judges(caplog):
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=1, deadline_s=30, jail=jail.JailConfig(enabled=False)))
  with caplog.at_level(logging.WARNING), environment.KernelEnv(config) as env:
    verdicts = env.evaluate([(TASK, vector_add()),
                             (TASK, vector_add("x_ref[...] * y_ref[...]"))])
  assert [v.status for v in verdicts] == [Status.OK, Status.WRONG_OUTPUT]
  (line,) = [r.getMessage() for r in caplog.records if "OS layer" in r.getMessage()]
  assert "MISSING: OS layer switched off" in line


def test_scratch_dirs_are_removed_and_every_phase_is_timed(env):
  env.evaluate([(TASK, vector_add())] * 3)
  root = env.pool._scratch_root
  deadline = time.monotonic() + 10
  while len(os.listdir(root)) > env.pool.size and time.monotonic() < deadline:
    time.sleep(0.05)  # the last killed worker may not be reaped yet
  # Only the slots' spares (not yet used) still have one.
  assert len(os.listdir(root)) <= env.pool.size
  done = [life for life in env.pool.lives if life.started is not None]
  assert len(done) >= 3
  for life in done:
    phases = life.phases()
    assert {"fork", "jail", "backend", "confine", "job", "teardown"} <= set(phases)
    assert all(s >= 0 for s in phases.values())


def test_a_dead_zygote_is_replaced(env):
  env.evaluate([(TASK, vector_add())] * 2)  # each slot has a spare now
  old = env.pool._starter.zygote
  faults = env.pool.harness_faults
  os.kill(old._process.pid, 9)
  old._process.wait(10)
  # Its workers are doomed (its reader kills them when it sees the death,
  # maybe only later), even one still starting: no job may be sent to
  # them, so none faults; they run on workers of a new zygote.
  verdicts = env.evaluate([(TASK, vector_add())] * 2)
  assert [v.status for v in verdicts] == [Status.OK] * 2
  assert env.pool._starter.zygote is not old
  assert env.pool.harness_faults == faults


def test_a_recycled_worker_judges_every_job_without_a_fault():
  """Trusted code (the warm start's) reuses one worker for many jobs: the
  inputs travel in the job (no memfd once the worker is confined) and each
  job's candidate module replaces the last one's."""
  setup = pool_lib.worker_lib.WorkerSetup(jobs_per_worker=8)
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=1, deadline_s=15, setups=(setup,)))
  answers = [vector_add(), vector_add("x_ref[...] * y_ref[...]")] * 3
  with environment.KernelEnv(config) as env:
    statuses = [v.status for v in env.evaluate([(TASK, a) for a in answers])]
    assert statuses == [Status.OK, Status.WRONG_OUTPUT] * 3
    assert env.pool.harness_faults == 0  # each reuse had faulted, then retried

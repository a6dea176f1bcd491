"""The pool: order, crashes, harness faults, respawn (real worker processes)."""

import pytest

from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
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


class _FlakyWorker(pool_lib._Worker):
  """Fails its start-up handshake for the first `failures` workers made."""
  failures = 0

  def receive(self, deadline_s, max_bytes):
    if type(self).failures > 0:
      type(self).failures -= 1
      return None
    return super().receive(deadline_s, max_bytes)


def test_harness_fault_is_retried_once_then_reported(monkeypatch):
  monkeypatch.setattr(pool_lib, "_Worker", _FlakyWorker)
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(num_workers=1, deadline_s=15))
  with environment.KernelEnv(config) as env:
    _FlakyWorker.failures = 1
    (retried,) = env.evaluate([(TASK, vector_add())])
    assert retried.status is Status.OK
    _FlakyWorker.failures = 2
    (failed,) = env.evaluate([(TASK, vector_add())])
    assert failed.status is Status.HARNESS_ERROR
    assert "not your fault" in failed.feedback
    assert env.pool.harness_faults == 3


def test_worker_count_defaults_to_cores():
  assert pool_lib.PoolConfig().worker_count() >= 1
  with pytest.raises(ValueError, match="setups"):
    pool_lib.WorkerPool(pool_lib.PoolConfig(num_workers=2, setups=(
        pool_lib.worker_lib.WorkerSetup(),)))

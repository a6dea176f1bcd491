"""Device holds: shared checks, exclusive timing, no starvation, no deadlock."""

import threading
import time

import pytest

from leap_jax.env import device_gate


class _Clock:
  """A counter: every reading is one tick later (intervals stay ordered)."""

  def __init__(self):
    self._t = 0
    self._lock = threading.Lock()

  def __call__(self) -> float:
    with self._lock:
      self._t += 1
      return float(self._t)


def _later(fn, *args):
  t = threading.Thread(target=fn, args=args, daemon=True)
  t.start()
  return t


def test_shared_holds_on_one_device_run_together():
  gate = device_gate.DeviceGate(_Clock())
  a, b = gate.enter("0", "a"), gate.enter("0", "b")
  assert gate.active("0") == 2
  gate.leave(a)
  gate.leave(b)
  (ia, ib) = sorted(gate.log, key=lambda i: i.who)
  assert ia.kind == ib.kind == "run"
  assert ia.start < ib.start < ia.end < ib.end  # they overlapped


def test_exclusive_waits_for_the_others_and_blocks_new_holds():
  gate = device_gate.DeviceGate(_Clock())
  timed, other = gate.enter("0", "timed"), gate.enter("0", "other")
  inside, entered = threading.Event(), threading.Event()

  def time_it():
    with gate.exclusive(timed):
      inside.set()
      time.sleep(0.05)
  t = _later(time_it)
  assert not inside.wait(0.1)                    # `other` still runs
  assert gate.try_enter("0", "startup") is None  # nothing new meanwhile
  late = _later(lambda: (gate.leave(gate.enter("0", "late")), entered.set()))
  assert not entered.wait(0.05)
  assert gate.try_enter("1", "elsewhere") is not None  # other devices go on
  gate.leave(other)
  assert inside.wait(2)
  t.join(2)
  late.join(2)
  assert entered.is_set()
  gate.leave(timed)
  log = [i for i in gate.log if i.device == "0"]
  (ex,) = [i for i in log if i.kind == "exclusive"]
  for i in log:
    if i is not ex:
      assert i.end <= ex.start or i.start >= ex.end, (i, ex)


def test_two_jobs_waiting_to_time_on_one_device_take_turns():
  gate = device_gate.DeviceGate(_Clock())
  holds = [gate.enter("0", f"j{i}") for i in range(3)]
  done = []

  def job(hold):
    with gate.exclusive(hold):
      done.append(hold.who)
      time.sleep(0.02)
    gate.leave(hold)
  threads = [_later(job, h) for h in holds]
  for t in threads:
    t.join(5)
  assert sorted(done) == ["j0", "j1", "j2"]     # nobody waited for ever
  ex = sorted((i for i in gate.log if i.kind == "exclusive"), key=lambda i: i.start)
  assert all(a.end <= b.start for a, b in zip(ex, ex[1:]))


@pytest.mark.parametrize("seed", range(3))
def test_random_jobs_never_share_a_device_while_one_is_timed(seed):
  import random  # noqa: PLC0415
  rng = random.Random(seed)
  gate = device_gate.DeviceGate()
  def job(i):
    device = str(rng.randrange(2))
    hold = gate.enter(device, f"j{i}")
    time.sleep(rng.uniform(0, 0.01))
    if i % 3 == 0:
      with gate.exclusive(hold):
        time.sleep(rng.uniform(0, 0.01))
    gate.leave(hold)
  threads = [_later(job, i) for i in range(24)]
  for t in threads:
    t.join(10)
  log = list(gate.log)
  assert sum(i.kind == "exclusive" for i in log) == 8
  for ex in (i for i in log if i.kind == "exclusive"):
    for i in log:
      if i is not ex and i.device == ex.device:
        assert i.end <= ex.start or i.start >= ex.end, (i, ex)

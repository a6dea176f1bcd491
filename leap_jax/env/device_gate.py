"""Who may use a verification device when: shared checks, exclusive timing.

Several workers may check candidates on one GPU at once (correctness only
needs the device to be correct, not quiet), but a candidate is timed alone
on its device: while a hold is exclusive no other job or worker start-up
runs there, and while one waits for exclusivity nothing new starts there
(so timing never starves). A job holds its device from taking a worker to
its outcome and asks for exclusivity only for its timing; a job waiting for
exclusivity is idle, so two such jobs on one device take turns instead of
waiting for each other. Every hold's running and exclusive intervals are
logged with an injectable clock (what the scheduling tests check).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

RUN, WAITING, EXCLUSIVE = "run", "waiting", "exclusive"


@dataclasses.dataclass(frozen=True)
class Interval:
  """One stretch of a hold: `run` (shared use) or `exclusive`."""
  who: str
  device: str
  kind: str
  start: float
  end: float


@dataclasses.dataclass(eq=False)
class Hold:
  who: str
  device: str
  state: str = RUN
  since: float = 0.0


class DeviceGate:
  """Shared and exclusive holds on named devices (thread-safe)."""

  def __init__(self, clock: Callable[[], float] = time.monotonic,
               log_size: int = 100_000):
    self._clock = clock
    self._cond = threading.Condition()
    self._holds: dict[str, list[Hold]] = collections.defaultdict(list)
    self._queue: dict[str, collections.deque[Hold]] = (
        collections.defaultdict(collections.deque))
    self.log: collections.deque[Interval] = collections.deque(maxlen=log_size)

  def _open(self, device: str) -> bool:
    return not self._queue[device]

  def _add(self, device: str, who: str) -> Hold:
    hold = Hold(who, device, RUN, self._clock())
    self._holds[device].append(hold)
    return hold

  def _close_interval(self, hold: Hold) -> None:
    if hold.state in (RUN, EXCLUSIVE):
      self.log.append(Interval(hold.who, hold.device, hold.state, hold.since,
                               self._clock()))

  def enter(self, device: str, who: str) -> Hold:
    """A shared hold; waits while the device is (or will be) exclusive."""
    with self._cond:
      self._cond.wait_for(lambda: self._open(device))
      return self._add(device, who)

  def try_enter(self, device: str, who: str) -> Hold | None:
    """A shared hold now, or None if the device is (or will be) exclusive."""
    with self._cond:
      return self._add(device, who) if self._open(device) else None

  def leave(self, hold: Hold) -> None:
    with self._cond:
      self._close_interval(hold)
      self._holds[hold.device].remove(hold)
      if hold in self._queue[hold.device]:
        self._queue[hold.device].remove(hold)
      self._cond.notify_all()

  def _may_run_alone(self, hold: Hold) -> bool:
    queue = self._queue[hold.device]
    return queue[0] is hold and all(
        h is hold or h.state == WAITING for h in self._holds[hold.device])

  @contextlib.contextmanager
  def exclusive(self, hold: Hold) -> Iterator[None]:
    """Runs the body with no other job or start-up active on the device."""
    with self._cond:
      self._close_interval(hold)
      hold.state = WAITING
      self._queue[hold.device].append(hold)
      self._cond.notify_all()  # the head may now be the only one running
      self._cond.wait_for(lambda: self._may_run_alone(hold))
      hold.state, hold.since = EXCLUSIVE, self._clock()
    try:
      yield
    finally:
      with self._cond:
        self._close_interval(hold)
        self._queue[hold.device].remove(hold)
        hold.state, hold.since = RUN, self._clock()
        self._cond.notify_all()

  def active(self, device: str) -> int:
    with self._cond:
      return len(self._holds[device])

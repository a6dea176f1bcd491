"""A coordinated stop: SIGTERM on any process stops every process together.

A scheduler's preemption (SLURM, Kubernetes) may signal one host or all of
them, at any moment. Each process only notes the signal; once per step all
processes agree (one small all-gather at the same point of the step), so
every process stops after the same step and takes part in the same final
checkpoint. Stopping on a local flag alone would let one process enter the
collective save while another starts the next step's collectives: a hang.
"""

from __future__ import annotations

import signal
from typing import Any

from leap_jax import distributed


class StopSignal:
  """Notes SIGTERM between `install()` and `restore()`."""

  def __init__(self):
    self.requested = False  # this process's own flag
    self._previous: Any = None

  def install(self) -> "StopSignal":
    self._previous = signal.signal(signal.SIGTERM, self._note)
    return self

  def restore(self) -> None:
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None

  def _note(self, *_) -> None:
    self.requested = True

  def agreed(self) -> bool:
    """Whether any process was asked to stop; the same answer on every
    process (a collective: all of them call it once per step)."""
    return distributed.any_process(self.requested)

import os
import signal

from leap_jax import preemption


def test_sigterm_is_noted_not_fatal_and_the_handler_is_restored():
  before = signal.getsignal(signal.SIGTERM)
  stop = preemption.StopSignal().install()
  try:
    assert not stop.requested and not stop.agreed()
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.requested and stop.agreed()  # one process: its own flag
  finally:
    stop.restore()
  assert signal.getsignal(signal.SIGTERM) == before
  stop.restore()  # twice is harmless

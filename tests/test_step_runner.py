"""The step's own helpers; whole steps run in tests/test_trainer.py."""

import numpy as np

from leap_jax import step_runner
from leap_jax.env.verdict import Status, Verdict
from leap_jax.rl.rollout import Completion, Rollout, TurnRecord


def test_status_counts_and_stopwatch():
  recs = [TurnRecord(0, g, 0, [], Completion([], [], ""), Verdict("t", s))
          for g, s in enumerate([Status.OK, Status.NO_CODE, Status.OK])]
  shape = (1, 3, 1)
  ro = Rollout(["t"], recs, np.zeros(shape, bool), np.zeros(shape, bool),
               np.ones(1, np.int32), np.full(shape, np.nan), 1)
  assert step_runner.status_counts(ro) == {"no_code": 1, "ok": 2}
  watch = step_runner.Stopwatch()
  double = watch.wrap("work", lambda x: 2 * x)
  assert double(2) == 4 and double(3) == 6
  assert set(watch.seconds) == {"work"} and watch.seconds["work"] >= 0


def test_turn1_judged_leaves_out_turn1_harness_errors_only():
  """Prompt 0: g0 right, g1 harness_error at turn 1, g2 wrong at turn 1 and
  harness_error at turn 2 (its turn-1 verdict stands). Prompt 1: both wrong."""
  def rec(p, g, t, status):
    return TurnRecord(p, g, t, [], Completion([], [], ""), Verdict("t", status))
  recs = [rec(0, 0, 0, Status.OK), rec(0, 1, 0, Status.HARNESS_ERROR),
          rec(0, 2, 0, Status.WRONG_OUTPUT), rec(0, 2, 1, Status.HARNESS_ERROR),
          rec(1, 0, 0, Status.NO_CODE), rec(1, 1, 0, Status.WRONG_OUTPUT),
          rec(1, 1, 1, Status.OK)]
  shape = (2, 3, 2)
  ro = Rollout(["a", "b"], recs, np.zeros(shape, bool), np.zeros(shape, bool),
               np.ones(2, np.int32), np.full(shape, np.nan), 2)
  assert step_runner.turn1_judged(ro) == [2, 2]

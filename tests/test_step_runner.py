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

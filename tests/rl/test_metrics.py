"""Section 7 metrics on a hand case."""

import numpy as np
import pytest

from leap_jax.rl import metrics


def test_rollout_metrics():
  ok = np.array([[[0, 1, 0], [1, 0, 0]], [[0, 0, 0], [0, 0, 0]]], bool)
  active = np.array([[[1, 1, 0], [1, 0, 0]], [[1, 0, 0], [1, 0, 0]]], bool)
  speed = np.full((2, 2, 3), np.nan, np.float32)
  speed[0, 0, 1], speed[0, 1, 0] = 1.5, 1.0
  m = metrics.rollout_metrics(ok, active, np.array([3, 1]), speed,
                              fast_ps=(1.0, 1.2, 2.0), tokens_generated=42)
  assert m['acc@1'] == 0.25 and m['acc@2'] == 0.5 and m['acc@3'] == 0.5
  assert m['turns_per_pass'] == 5 / 2
  assert m['activated_groups'] == 0.5
  assert (m['fast_1'], m['fast_1.2'], m['fast_2']) == (0.25, 0.25, 0.0)
  assert m['tokens_generated'] == 42


def test_nothing_solved():
  m = metrics.rollout_metrics(np.zeros((1, 2, 1), bool),
                              np.ones((1, 2, 1), bool), np.array([1]))
  assert m['acc@1'] == 0 and np.isnan(m['turns_per_pass'])
  assert 'fast_1' not in m

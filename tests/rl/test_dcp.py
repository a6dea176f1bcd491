"""DCP budgets and the active mask: hand cases and properties."""

import chex
import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from leap_jax.rl import dcp


def test_budgets_easy_hopeless_middle():
  ok_PG = np.array([[1, 1, 1, 0],   # easy: 1 failure < t_min
                    [0, 0, 0, 0],   # hopeless: 4 failures > t_max
                    [1, 0, 0, 1],   # middle: 2
                    [1, 0, 0, 0]],  # middle: 3
                   bool)
  budgets = dcp.turn_budgets(ok_PG, 3, 2, 3)
  chex.assert_type(budgets, np.int32)
  np.testing.assert_array_equal(budgets, [1, 1, 3, 3])


def test_budgets_group_of_two_defaults():
  # G = 2: T_min = ceil(2/2) = 1, T_max = 1: only a split group continues.
  ok_PG = np.array([[1, 0], [1, 1], [0, 0], [0, 1]], bool)
  np.testing.assert_array_equal(dcp.turn_budgets(ok_PG, 3, 1, 1), [3, 1, 1, 3])


def test_budgets_single_turn():
  ok_PG = np.array([[1, 0], [0, 0]], bool)
  np.testing.assert_array_equal(dcp.turn_budgets(ok_PG, 1, 1, 1), [1, 1])


def test_budgets_jit_with_static_ints():
  fn = jax.jit(dcp.turn_budgets, static_argnums=(1, 2, 3))
  ok_PG = np.array([[1, 0, 0, 1]], bool)
  np.testing.assert_array_equal(fn(ok_PG, 3, 2, 3), [3])


def test_active_mask_hand_case():
  budgets_P = np.array([3, 1])
  ok_PGT = np.array([
      [[0, 1, 0],   # solved at turn 2: turn 3 inactive
       [1, 0, 1],   # solved at once
       [0, 0, 0],   # never: all 3 turns
       [0, 0, 1]],  # solved at turn 3
      [[0, 1, 1],   # pruned prompt: later ok values are ignored
       [1, 0, 0],
       [0, 0, 0],
       [0, 0, 0]]], bool)
  want = np.array([
      [[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]],
      [[1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]]], bool)
  active = jax.jit(dcp.active_mask)(budgets_P, ok_PGT)
  chex.assert_shape(active, (2, 4, 3))
  np.testing.assert_array_equal(active, want)
  np.testing.assert_array_equal(dcp.turns_used(active),
                                [[2, 1, 3, 3], [1, 1, 1, 1]])


def test_active_mask_single_turn():
  ok_PGT = np.zeros((2, 2, 1), bool)
  np.testing.assert_array_equal(dcp.active_mask(np.array([1, 1]), ok_PGT),
                                np.ones((2, 2, 1), bool))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6).flatmap(lambda g: st.tuples(
    st.just(g), st.integers(1, 4),
    hnp.arrays(bool, st.tuples(st.just(4), st.just(g),
                               st.just(4))))))
def test_properties(args):
  g, t, ok_PGT = args
  ok_PGT = ok_PGT[..., :t]
  t_min, t_max = -(-g // 2), g - 1
  budgets = np.asarray(dcp.turn_budgets(ok_PGT[..., 0], t, t_min, t_max))
  assert set(np.unique(budgets)) <= {1, t}
  active = np.asarray(dcp.active_mask(budgets, ok_PGT))
  # Pruned prompts never get a second turn; turn 1 is always active.
  assert not active[budgets == 1][..., 1:].any()
  assert active[..., 0].all()
  # Active turns form a prefix, and nothing runs after a success.
  assert (np.diff(active.astype(int), axis=-1) <= 0).all()
  solved_before = np.cumsum(ok_PGT & active, -1) - (ok_PGT & active)
  assert not (active & (solved_before > 0)).any()

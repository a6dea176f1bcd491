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


def test_a_harness_error_is_not_a_failure():
  # G = 4, t_min 2, t_max 3. Row 0: 2 ok, 1 failure, 1 dropped: n_fail 1,
  # so the group stays pruned (counting the dropped one would make it 2:
  # activated). Row 1: 1 ok, 2 failures, 1 dropped: n_fail 2, activated.
  # Row 2: all four dropped: n_fail 0, pruned.
  ok_PG = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], bool)
  dropped_PG = np.array([[0, 0, 0, 1], [0, 0, 0, 1], [1, 1, 1, 1]], bool)
  np.testing.assert_array_equal(dcp.turn_budgets(ok_PG, 3, 2, 3), [3, 3, 1])
  np.testing.assert_array_equal(
      dcp.turn_budgets(ok_PG, 3, 2, 3, dropped_PG), [1, 3, 1])


def test_random_budgets_activate_dcps_count_blindly():
  key = jax.random.key(0)
  fn = jax.jit(dcp.random_budgets, static_argnums=(2, 3))
  budgets = np.asarray(fn(key, 3, 8, 3))
  assert sorted(budgets.tolist()) == [1] * 5 + [3] * 3
  np.testing.assert_array_equal(fn(key, 3, 8, 3), budgets)  # seeded
  assert (np.asarray(fn(key, 0, 8, 3)) == 1).all()
  assert (np.asarray(fn(key, 8, 8, 3)) == 3).all()
  # Uniform over prompts: each is chosen in about 3/8 of 800 draws
  # (binomial sd 14; the bounds are 5 sd).
  draws = jax.vmap(lambda k: dcp.random_budgets(k, 3, 8, 3))(
      jax.random.split(jax.random.key(1), 800))
  counts = np.sum(np.asarray(draws) > 1, axis=0)
  assert (np.abs(counts - 300) < 70).all(), counts


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


def test_a_dropped_turn_ends_the_trajectory():
  # done = ok or harness_error: g0 dropped at turn 1, g1 at turn 2.
  done = np.array([[[1, 0, 0], [0, 1, 0], [0, 0, 0]]], bool)
  np.testing.assert_array_equal(dcp.active_mask(np.array([3]), done),
                                [[[1, 0, 0], [1, 1, 0], [1, 1, 1]]])


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

"""leap_jax.comparison on hand-computed runs: eval steps, compile-free wall
clock, the target and censoring, ratios, paired bootstrap, permutation
null."""

import pytest

from leap_jax import comparison


def _rows(seconds, env_calls=10, tokens=100):
  return [{"step": i + 1, "seconds_step": s, "env_calls": env_calls,
           "tokens_generated": tokens} for i, s in enumerate(seconds)]


def test_eval_steps_always_end_at_the_last_step():
  assert comparison.eval_steps(8, 4) == [4, 8]
  assert comparison.eval_steps(10, 4) == [4, 8, 10]
  assert comparison.eval_steps(2, 4) == [2]


def test_first_steps_count_at_the_median_of_the_others():
  # Steps 1 and 3 started a process (compilation): 50 and 40 become the
  # median of 10, 12 -> 11.
  rows = _rows([50.0, 10.0, 40.0, 12.0])
  assert comparison.step_walls(rows, {1, 3}) == [11.0, 10.0, 11.0, 12.0]
  assert comparison.step_walls(rows[:1], {1}) == [50.0]  # nothing else to go by
  totals = comparison.cumulative(rows, {1, 3})
  assert totals["wall_s"] == {0: 0.0, 1: 11.0, 2: 21.0, 3: 32.0, 4: 44.0}
  assert totals["env_calls"][4] == 40 and totals["tokens"][2] == 200


def test_to_target_and_censoring():
  totals = comparison.cumulative(_rows([10.0] * 8), set())
  at = comparison.to_target({0: 0.1, 4: 0.2, 8: 0.4}, totals, 0.2)
  assert at == {"step": 4, "censored": False, "wall_s": 40.0,
                "env_calls": 40.0, "tokens": 400.0}
  never = comparison.to_target({0: 0.1, 4: 0.1, 8: 0.15}, totals, 0.2)
  assert never["censored"] and never["step"] == 8 and never["wall_s"] == 80.0


def _seed(leap_acc, full_acc, leap_s=10.0, full_s=20.0, full_calls=16):
  accs = {"leap": leap_acc, "multiturn_full": full_acc}
  totals = {"leap": comparison.cumulative(_rows([leap_s] * 8), {1}),
            "multiturn_full": comparison.cumulative(_rows([full_s] * 8, full_calls),
                                             {1})}
  return accs, totals


def test_seed_ratio_by_hand():
  # Target .2 (frozen .1 + .1). leap reaches it at step 4 (40 s, 40 calls),
  # full at step 8 (160 s, 128 calls): ratios 4 and 3.2.
  accs, totals = _seed({0: .1, 4: .25, 8: .3}, {0: .1, 4: .15, 8: .2})
  out = comparison.seed_ratios(accs, totals, 0.2)
  assert out["wall_s_ratio"] == pytest.approx(4.0)
  assert out["env_calls_ratio"] == pytest.approx(3.2)
  assert out["tokens_ratio"] == pytest.approx(2.0)
  # full never gets there: its ratio is a lower bound at its last step.
  accs, totals = _seed({0: .1, 4: .25, 8: .3}, {0: .1, 4: .1, 8: .1})
  out = comparison.seed_ratios(accs, totals, 0.2)
  assert out["reach"]["multiturn_full"]["censored"]
  assert out["wall_s_ratio"] == pytest.approx(4.0)
  full, leap = out["reach"]["multiturn_full"], out["reach"]["leap"]
  assert comparison.ratio_bound(full, leap, "wall_s") == ">=4.000"
  assert comparison.ratio_bound(leap, leap, "wall_s") == "1.000"
  assert comparison.ratio_bound(full, full, "wall_s") is None  # neither
  # Neither, or only leap, never gets there: no ratio.
  accs, totals = _seed({0: .1, 4: .1, 8: .1}, {0: .1, 4: .1, 8: .1})
  assert comparison.seed_ratios(accs, totals, 0.2)["wall_s_ratio"] is None
  accs, totals = _seed({0: .1, 4: .1, 8: .1}, {0: .1, 4: .3, 8: .3})
  out = comparison.seed_ratios(accs, totals, 0.2)
  assert out["wall_s_ratio"] is None
  # Only leap censored: full got there at step 4 (4 x 20 s), leap's 8
  # steps of 10 s did not: the ratio is at most 80 / 80.
  full, leap = out["reach"]["multiturn_full"], out["reach"]["leap"]
  assert leap["censored"] and not full["censored"]
  assert comparison.ratio_bound(full, leap, "wall_s") == "<=1.000"


def test_paired_bootstrap_and_null_p():
  low, high = comparison.paired_bootstrap([1.0, 2.0, 3.0, None], 4000)
  assert 1.0 <= low < 2.0 < high <= 3.0
  assert comparison.paired_bootstrap([2.0, 2.0], 100) == (2.0, 2.0)
  assert comparison.paired_bootstrap([None], 100) == (None, None)
  assert comparison.null_p(2.0, [1.0, 2.0, 3.0]) == pytest.approx(3 / 4)
  assert comparison.null_p(5.0, [1.0, 2.0, 3.0]) == pytest.approx(1 / 4)
  assert comparison.null_p(None, [1.0]) is None


def test_permutation_null_when_both_learn_alike():
  # Both modes have the same accuracy curve; leap is 2x cheaper per step.
  # Whatever the swaps, both reach the target at the same step: every null
  # ratio is the cost ratio 2, and the observed 2 has p = 1.
  accs, totals = _seed({0: .1, 4: .2, 8: .3}, {0: .1, 4: .2, 8: .3})
  null = comparison.permutation_null([accs], [totals], [0.2], 200)
  assert set(null) == {2.0}
  # leap learns faster: swaps make the null spread below the observed 4.
  accs, totals = _seed({0: .1, 4: .3, 8: .3}, {0: .1, 4: .1, 8: .3})
  observed = comparison.seed_ratios(accs, totals, 0.2)["wall_s_ratio"]
  null = comparison.permutation_null([accs, accs], [totals, totals], [0.2, 0.2], 400)
  assert observed == pytest.approx(4.0)
  assert min(null) == pytest.approx(1.0) and max(null) == pytest.approx(4.0)
  assert 0.2 < comparison.null_p(observed, null) < 0.35  # both seeds unswapped: 1/4


def test_summarize_by_hand():
  a1, t1 = _seed({0: .1, 4: .25, 8: .3}, {0: .1, 4: .15, 8: .2})
  a2, t2 = _seed({0: .1, 4: .25, 8: .25}, {0: .1, 4: .25, 8: .35})
  out = comparison.summarize([0, 1], [a1, a2], [t1, t2], [0.2, 0.2],
                      [0.25, 0.5, 0.75], 500)
  assert out["seeds"] == 2
  # Seed ratios 4 (see above) and 2 (both at step 4): mean 3.
  assert out["wallclock_ratio_mean"] == pytest.approx(3.0)
  assert 2.0 <= out["wallclock_ratio_ci_low"] <= 3.0
  assert out["env_calls_ratio_mean"] == pytest.approx((3.2 + 1.6) / 2)
  assert out["acc_gap_mean"] == pytest.approx(((.2 - .3) + (.35 - .25)) / 2)
  assert out["activated_groups_mean"] == pytest.approx(0.5)
  assert 0 < out["null_p"] <= 1
  assert out["reached"] == {"leap": 2, "multiturn_full": 2}
  assert out["ratio_seeds"] == 2
  # A third seed where only leap misses the target: no ratio (the mean
  # stays 3, over 2 of 3 seeds), and the counts say so.
  a3, t3 = _seed({0: .1, 4: .15, 8: .15}, {0: .1, 4: .25, 8: .3})
  out = comparison.summarize([0, 1, 2], [a1, a2, a3], [t1, t2, t3],
                             [0.2] * 3, [0.5], 500)
  assert out["wallclock_ratio_mean"] == pytest.approx(3.0)
  assert out["reached"] == {"leap": 2, "multiturn_full": 3}
  assert out["ratio_seeds"] == 2
  # ... but the left-out seed still shows its bound: full reached .2 at
  # step 4 (80 s), leap had spent 80 s by step 8 without reaching it.
  assert out["wallclock_ratio_per_seed"] == ["4.000", "2.000", "<=1.000"]


def test_text_table_has_every_rows_columns():
  # leap_vs_full's first row (the frozen control) lacks the modes' columns.
  table = comparison.text_table([{"run": "frozen", "acc": 0.5},
                                 {"run": "leap", "acc": None, "step": 8}])
  assert table.splitlines() == ["   run  acc  step",
                                "frozen  0.5     -",
                                "  leap    -     8"]
  assert comparison.text_table([]) == "(no rows)"

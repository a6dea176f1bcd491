"""The step-0 analysis on hand-made rollouts, and the judges it wraps."""

import numpy as np
import pytest

from leap_jax.env.environment import EnvConfig
from leap_jax.env.verdict import Status, Verdict
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart import analysis


def _ok(rows):
  """[P, G, T] from strings per prompt: one char per sample, the turn it
  succeeds at ("1".."3") or "-" (never)."""
  p, g, t = len(rows), len(rows[0]), 3
  ok = np.zeros((p, g, t), bool)
  for i, row in enumerate(rows):
    for j, c in enumerate(row):
      if c != "-":
        ok[i, j, int(c) - 1] = True
  return ok


# G = 8, T = 3: one group of each type.
OK = _ok(["11111111",   # all correct
          "1111112-",   # easy: 2 failures, 1 repaired
          "11123-2-",   # activated: 5 failures, 3 repaired
          "-2------"])  # hopeless: 8 failures, 1 repaired


def test_group_types_by_turn1_failures():
  assert list(analysis.group_types(OK[:, :, 0], 4, 7)) == [
      "all_correct", "easy", "activated", "hopeless"]


def test_repair_table_hand_counted():
  table = analysis.repair_table(OK, 4, 7)
  assert table["all_correct"] == {"groups": 1, "failed": 0, "repaired": 0,
                                  "repair_rate": None}
  assert table["easy"] == {"groups": 1, "failed": 2, "repaired": 1,
                           "repair_rate": 0.5}
  assert table["activated"] == {"groups": 1, "failed": 5, "repaired": 3,
                                "repair_rate": 0.6}
  assert table["hopeless"]["failed"] == 8 and table["hopeless"]["repaired"] == 1


def test_resample_rate_is_two_fresh_draws_at_the_group_rate():
  # Activated group: p = 3/8 at turn 1; two fresh samples: 1 - (5/8)^2.
  assert analysis.resample_rate(OK, 4, 7) == pytest.approx(1 - (5 / 8) ** 2)
  two = np.concatenate([OK[2:3], _ok(["1111----"])])  # p = 3/8 (5 fails), 4/8 (4)
  want = (5 * (1 - (5 / 8) ** 2) + 4 * (1 - (4 / 8) ** 2)) / 9
  assert analysis.resample_rate(two, 4, 7) == pytest.approx(want)
  assert analysis.resample_rate(OK[:1], 4, 7) is None


def test_accuracy_and_spread():
  acc = analysis.accuracy(OK)
  assert acc["acc@1"] == pytest.approx((8 + 6 + 3 + 0) / 32)
  assert acc["acc@3"] == pytest.approx((8 + 7 + 6 + 1) / 32)
  assert analysis.spread(OK) == {"0": 1, "1": 0, "2": 0, "3": 1, "4": 0,
                                 "5": 0, "6": 1, "7": 0, "8": 1}


class _Env:
  def __init__(self):
    self.calls = []

  def evaluate(self, requests):
    self.calls.append(list(requests))
    return [Verdict(t, Status.OK if "good" in a else Status.WRONG_OUTPUT,
                    "Tolerances.") for t, a in requests]


def test_caching_judge_asks_once_per_distinct_answer():
  env = _Env()
  judge = analysis.CachingJudge(env)
  reqs = [("t", "good"), ("t", "bad"), ("t", "good"), ("u", "good")]
  first = judge.evaluate(reqs)
  assert [v.correct for v in first] == [True, False, True, True]
  assert env.calls == [[("t", "good"), ("t", "bad"), ("u", "good")]]
  judge.evaluate(reqs)
  assert len(env.calls) == 1 and judge.env_calls == 3


def test_bare_judge_hides_only_the_feedback():
  env = _Env()
  judge = analysis.CachingJudge(env)
  real = judge.evaluate([("t", "bad")])[0]
  bare = analysis.CachingJudge(env, judge.cache, bare=True)
  (v,) = bare.evaluate([("t", "bad")])
  assert "wrong_output" in real.feedback
  assert v.feedback == analysis.BARE_FEEDBACK
  assert v.correct is False and v.status is Status.WRONG_OUTPUT
  assert bare.env_calls == 0


# OK's turn 1 with other later turns: easy as in OK; activated repairs
# samples 3-6 (OK: 3, 4, 6); hopeless repairs none (OK: sample 1).
BARE_OK = _ok(["11111111",
               "1111112-",
               "1112222-",
               "--------"])


def test_paired_repairs_hand_counted():
  paired = analysis.paired_repairs(OK, BARE_OK, 4, 7)
  # Failed: 2 + 5 + 8. Both: easy's 6, activated's 3, 4, 6. Feedback only:
  # hopeless's 1; bare only: activated's 5. n = 2 discordant, k = 1: p = 1.
  assert paired == {"failed": 15, "feedback_only": 1, "bare_only": 1,
                    "both": 4, "p": 1.0}


def test_paired_repairs_sign_test_and_refuses_unpaired_runs():
  # Three failures, repaired only with feedback: p = 2 * (1/2)^3.
  ok = _ok(["1111----"])
  ok[0, 4:7, 1] = True
  bare = _ok(["1111----"])
  paired = analysis.paired_repairs(ok, bare, 4, 7)
  assert (paired["feedback_only"], paired["bare_only"]) == (3, 0)
  assert paired["p"] == pytest.approx(0.25)
  assert analysis.paired_repairs(bare, bare, 4, 7)["p"] == 1.0
  with pytest.raises(ValueError, match="not paired"):
    analysis.paired_repairs(OK, _ok(["1" * 8] * 4), 4, 7)


def test_report_names_every_group_and_yardstick():
  summary = analysis.summary(OK, 4, 7)
  result = {"samples": 8, "t_min": 4, "t_max": 7, "turns": 3, "tasks": 4,
            "paired": analysis.paired_repairs(OK, BARE_OK, 4, 7),
            "feedback": summary, "bare_feedback": summary,
            "turn1_failures": {"wrong_output": 15}, "env_calls": 10,
            "turn1_same_share": 1.0}
  text = analysis.format_report(result)
  for words in ("all correct (pruned)", "easy, 1-3 failures (pruned)",
                "activated, 4-7 failures", "hopeless, 8 failures (pruned)",
                "60.0%", 'bare "wrong"', "2 fresh samples would succeed",
                "the same 15 failed trajectories", "sign test p = 1"):
    assert words in text, words


def test_turn1_statuses_count_turn1_answers_only():
  records = [type("T", (), {"t": t, "verdict": Verdict("x", st, "")})()
             for t, st in ((0, Status.OK), (0, Status.WRONG_OUTPUT),
                           (0, Status.WRONG_OUTPUT), (1, Status.OK))]
  ro = type("R", (), {"records": records})()
  assert analysis.turn1_statuses(ro) == {"wrong_output": 2, "ok": 1}
  assert analysis.turn1_failures(ro) == {"wrong_output": 2}


def _record(p, g, t, text, correct):
  verdict = Verdict("x", Status.OK if correct else Status.WRONG_OUTPUT, "")
  completion = type("C", (), {"text": text})()
  return type("T", (), {"p": p, "g": g, "t": t, "completion": completion,
                        "verdict": verdict})()


def test_turn2_copies_counts_failed_trajectories_only():
  body = "h = x\n" * 40
  records = [_record(0, 0, 0, body, False), _record(0, 0, 1, body, False),
             _record(0, 1, 0, body, False),
             _record(0, 1, 1, body + "h = -h\n", True),  # ratio 0.99
             _record(0, 2, 0, body, False), _record(0, 2, 1, "other", False),
             _record(0, 3, 0, body, True),  # solved: no turn 2 counted
             _record(0, 3, 1, body, True)]
  ro = type("R", (), {"records": records})()
  assert analysis.turn2_copies(ro) == {"answers": 3, "identical": 1,
                                       "near": 1}
  summary = analysis.summary(OK, 4, 7)
  result = {"samples": 8, "t_min": 4, "t_max": 7, "turns": 3, "tasks": 4,
            "paired": None, "feedback": summary, "bare_feedback": summary,
            "turn1_failures": {}, "env_calls": 10, "turn1_same_share": 0.9,
            "turn2_copies": {"feedback": analysis.turn2_copies(ro),
                             "bare_feedback": analysis.turn2_copies(ro)}}
  assert ("with feedback 1 identical, 1 near copies of 3"
          in analysis.format_report(result))


def test_report_says_when_the_runs_are_not_paired():
  summary = analysis.summary(OK, 4, 7)
  result = {"samples": 8, "t_min": 4, "t_max": 7, "turns": 3, "tasks": 4,
            "paired": None, "feedback": summary, "bare_feedback": summary,
            "turn1_failures": {}, "env_calls": 10, "turn1_same_share": 0.9}
  assert "no paired repairs" in analysis.format_report(result)


class _ReluOnly:
  """relu is correct whatever the answer; every other task is wrong."""

  def __init__(self):
    self.config = EnvConfig()
    self.calls = 0

  def evaluate(self, requests):
    self.calls += len(requests)
    return [Verdict(t, Status.OK if t == "level1/relu" else
                    Status.WRONG_OUTPUT, "max abs error 1.0")
            for t, _ in requests]


def test_analyse_groups_both_runs_with_dcp_bounds_of_its_g(tiny_policy):
  env = _ReluOnly()
  cfg = RLConfig(max_turns=2, max_new_tokens=8)  # its num_samples is 8
  result = analysis.analyse(tiny_policy, tiny_policy.params, env,
                            ["level1/relu", "level1/abs"], cfg,
                            num_samples=4, prompts_per_call=2)
  # G = 4: ceil(4 / 2) = 2 and 3, not the (4, 7) of the config's G = 8.
  assert (result["t_min"], result["t_max"]) == (2, 3)
  assert result["turns"] == 2 and result["samples"] == 4
  for key in ("feedback", "bare_feedback"):
    run = result[key]
    assert (run["acc@1"], run["acc@2"]) == (0.5, 0.5)
    assert run["groups"]["all_correct"]["groups"] == 1
    assert run["groups"]["hopeless"] == {"groups": 1, "failed": 4,
                                         "repaired": 0, "repair_rate": 0.0}
    assert run["repair_rate_activated"] is None
  assert result["turn1_same_share"] == 1.0
  assert result["paired"]["failed"] == 4  # abs's, hopeless
  assert result["turn1_failures"] == {"wrong_output": 4}
  # abs's 4 failures each have a turn 2 in both runs.
  assert result["turn2_copies"]["feedback"]["answers"] == 4

  # Each distinct (task, answer) is judged once over both runs: relu turn 1,
  # abs turns 1 and 2, abs turn 2 after bare feedback, 4 samples each.
  assert result["env_calls"] == env.calls <= 4 + 4 + 4 + 4
  assert "activated, 2-3 failures" in analysis.format_report(result)

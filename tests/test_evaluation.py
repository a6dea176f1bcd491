import json

import numpy as np
import pytest

from leap_jax import evaluation, run_log
from leap_jax.env.environment import EnvConfig
from leap_jax.env.verdict import Status, Timing, Verdict
from leap_jax.rl.config import RLConfig

TASKS = ["level1/relu", "level1/abs", "level2/matmul_bias_relu"]


def test_level_of():
  assert evaluation.level_of("level2/softmax") == "level2"


def test_table_has_a_row_per_level_and_dashes_for_nan():
  result = {"tasks": 3, "acc@1": 0.5, "acc@2": 0.75, "turns_per_pass": float("nan"),
            "fast_1": 0.0, "levels": {
                "level1": {"tasks": 2, "acc@1": 1.0, "acc@2": 1.0,
                           "turns_per_pass": 1.0, "fast_1": 0.0},
                "level2": {"tasks": 1, "acc@1": 0.0, "acc@2": 0.5,
                           "turns_per_pass": 4.0, "fast_1": 0.0}}}
  lines = evaluation.format_table({"step 4": result}, 2, (1.0,)).splitlines()
  assert lines[0].split() == ["checkpoint", "level", "tasks", "acc@1", "acc@2",
                              "turns_per_pass", "fast_1"]
  assert lines[2].split() == ["step", "4", "all", "3", "0.500", "0.750", "-",
                              "0.000"]
  assert lines[4].split()[2:4] == ["level2", "1"]


class _OkForRelu:
  """relu is solved at turn 1, abs at turn 2, the level-2 task never."""

  def __init__(self):
    self.config = EnvConfig(timing=True)
    self.seen = {}

  def evaluate(self, requests):
    out = []
    for task, _ in requests:
      n = self.seen[task] = self.seen.get(task, 0) + 1
      ok = task == "level1/relu" or (task == "level1/abs" and n > 2)
      timing = Timing(1.5, 1.5, 1.4, 1.6, 0.05, 10, 2e-3, 1e-3, True)
      out.append(Verdict(task, Status.OK if ok else Status.WRONG_OUTPUT, "x",
                         timing=timing if ok else None))
    return out


def test_evaluate_counts_turns_levels_and_fast_p(tiny_policy):
  cfg = RLConfig(max_turns=2, max_new_tokens=8, fast_ps=(1.0, 2.0))
  res = evaluation.evaluate(tiny_policy, tiny_policy.params, _OkForRelu(),
                            TASKS, cfg, num_samples=2, prompts_per_call=2)
  # relu: 2/2 at turn 1; abs: its 2 samples fail turn 1, pass turn 2.
  np.testing.assert_allclose([res["acc@1"], res["acc@2"]], [2 / 6, 4 / 6])
  assert res["levels"]["level1"]["acc@2"] == 1.0
  assert res["levels"]["level2"]["acc@2"] == 0.0
  assert res["fast_1"] == pytest.approx(4 / 6) and res["fast_2"] == 0.0
  assert "activated_groups" not in res
  assert res["tasks"] == 3 and res["samples_per_task"] == 2


def test_across_processes_in_one_process_is_the_plain_evaluation(tiny_policy):
  cfg = RLConfig(max_turns=2, max_new_tokens=8, fast_ps=(1.0,))
  kwargs = dict(num_samples=2, prompts_per_call=2)
  plain = evaluation.evaluate(tiny_policy, tiny_policy.params, _OkForRelu(),
                              TASKS, cfg, **kwargs)
  shared = evaluation.evaluate(tiny_policy, tiny_policy.params, _OkForRelu(),
                               TASKS, cfg, across_processes=True, **kwargs)
  plain.pop("seconds"), shared.pop("seconds")
  assert json.dumps(run_log.json_safe(shared)) == json.dumps(
      run_log.json_safe(plain))  # (NaN == NaN there)


def test_as_metrics_names_the_eval_figures():
  result = {"tasks": 3, "samples_per_task": 2, "turns": 2, "acc@1": 0.5,
            "acc@2": 0.75, "turns_per_pass": 1.5, "trajectories": 6.0,
            "levels": {"level1": {"tasks": 2, "acc@1": 1.0}}, "seconds": 4.5}
  assert evaluation.as_metrics(result) == {
      "eval/tasks": 3, "eval/acc@1": 0.5, "eval/acc@2": 0.75,
      "eval/turns_per_pass": 1.5,
      "eval/levels": {"level1": {"tasks": 2, "acc@1": 1.0}},
      "seconds_eval": 4.5}

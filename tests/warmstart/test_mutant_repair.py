"""Planted-bug repair, with a scripted policy whose behaviour is known."""

import numpy as np
import pytest

import kernels_pallas
from leap_jax.env.candidate import fence
from leap_jax.env.environment import EnvConfig
from leap_jax.env.verdict import Status, Verdict
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart import mutant_repair, mutations

TASK = kernels_pallas.resolve_tasks("gen:eval:1")[0]
SOLUTION = fence(kernels_pallas.get_task(TASK).solution_candidate_source)
FEEDBACK = "Max abs error 1.0; the line to fix is named here"


class _CharTokenizer:
  chat_template = None
  pad_token_id = 0

  def encode(self, text, add_special_tokens=True):
    return [ord(c) for c in text]


class _Completion:
  def __init__(self, text):
    self.text = text


class _Sampler:
  """Fresh prompt: a wrong answer. Repair prompt: the solution when the
  feedback is real, the attempt copied back under bare "wrong"."""

  def sample(self, prompts, num_samples, rng):
    out = []
    for ids in prompts:
      text = "".join(map(chr, ids))
      answer = ("no kernel" if "```" not in text else
                SOLUTION if FEEDBACK in text else
                "```python" + text.rsplit("```python", 1)[1].split("```")[0]
                + "```")
      out += [_Completion(answer)] * num_samples
    return out


class _Policy:
  tokenizer = _CharTokenizer()

  def sampler_policy(self, params, cfg):
    return _Sampler()


class _Env:
  config = EnvConfig()

  def __init__(self):
    self.calls = 0

  def evaluate(self, requests):
    self.calls += len(requests)
    return [Verdict(t, Status.OK, "") if a.strip() == SOLUTION.strip() else
            Verdict(t, Status.WRONG_OUTPUT, FEEDBACK) for t, a in requests]


def test_a_policy_that_reads_the_feedback_repairs_every_planted_bug():
  env = _Env()
  result = mutant_repair.measure(_Policy(), None, env, [TASK],
                                 RLConfig(max_prompt_tokens=100_000),
                                 num_samples=2)
  n = len(mutations.mutate_all(SOLUTION, 0))
  assert result["mutants"] == n > 3
  assert result["fresh_acc"] == 0.0
  assert result["feedback"]["repaired"] == 1.0
  assert result["bare_feedback"]["repaired"] == 0.0  # the copy stays wrong
  assert set(result["feedback"]["by_mutation"]) == set(
      mutations.mutate_all(SOLUTION, 0))
  assert result["paired"] == {"feedback_more": n, "bare_more": 0,
                              "p": pytest.approx(2 / 2 ** n)}
  # Each distinct (task, answer) judged once: mutants, a fresh answer and
  # the solution; a copy the prompt renders as the mutant was judged already.
  assert result["env_calls"] == env.calls
  assert n + 2 <= env.calls <= 2 * n + 2
  text = mutant_repair.format_report(result)
  assert f"{n} planted one-line bugs in 1 tasks" in text
  assert "repaired with the feedback 100.0%" in text


def test_mutants_the_environment_passes_are_left_out():
  class _AllOk(_Env):
    def evaluate(self, requests):
      return [Verdict(t, Status.OK, "") for t, _ in requests]

  with pytest.raises(ValueError, match="nothing to repair"):
    mutant_repair.measure(_Policy(), None, _AllOk(), [TASK],
                          RLConfig(max_prompt_tokens=100_000))
  assert np.isclose(mutant_repair.sign_test(20, 7), 0.0192, atol=1e-4)

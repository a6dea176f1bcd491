"""Repair examples from a policy's own turn-1 failures (tiny policy, fake env)."""

import pytest

import kernels_pallas
from leap_jax.env.candidate import fence
from leap_jax.env.environment import EnvConfig
from leap_jax.env.verdict import Status, Verdict
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart import self_repair

class _Env:
  """relu: correct; abs: wrong, except the first distinct abs answer,
  which the harness fails on (no example from that one)."""

  def __init__(self):
    self.config = EnvConfig()
    self.requests = []
    self.harness_failed = None

  def evaluate(self, requests):
    self.requests += list(requests)
    out = []
    for task, answer in requests:
      if task == "level1/relu":
        out.append(Verdict(task, Status.OK, ""))
      elif self.harness_failed in (None, answer):
        self.harness_failed = answer
        out.append(Verdict(task, Status.HARNESS_ERROR, "pool died"))
      else:
        out.append(Verdict(task, Status.WRONG_OUTPUT, "max abs error 1.0"))
    return out


def _decoded(tokenizer, ids):
  return tokenizer.decode(list(ids), skip_special_tokens=False)


def test_one_example_per_distinct_turn1_failure(tiny_policy):
  env = _Env()
  cfg = RLConfig(max_new_tokens=8, max_turns=3)
  examples, statuses = self_repair.collect(
      tiny_policy, tiny_policy.params, env, ["level1/relu", "level1/abs"],
      cfg, num_samples=4, prompts_per_call=2)
  # Turn 1 only, whatever cfg.max_turns: 4 answers per task.
  assert len(env.requests) == 8 and sum(statuses.values()) == 8
  assert statuses.get("ok") == 4
  failed = {a for t, a in env.requests if t == "level1/abs"}
  failed.discard(env.harness_failed)
  assert failed and len(examples) == len(failed)
  tok = tiny_policy.tokenizer
  solution = fence(kernels_pallas.get_task("level1/abs").solution_candidate_source)
  for example in examples:
    assert example.task_id == "level1/abs" and example.kind == "self_repair"
    prompt = _decoded(tok, example.prompt_ids)
    assert "max abs error 1.0" in prompt
    assert _decoded(tok, example.answer_ids[:-1]) == solution
    assert example.answer_ids[-1] == tiny_policy.stop_token_ids[0]


def test_bare_feedback_replaces_the_verdicts(tiny_policy):
  env = _Env()
  examples, _ = self_repair.collect(
      tiny_policy, tiny_policy.params, env, ["level1/abs"],
      RLConfig(max_new_tokens=8), num_samples=4, feedback="wrong")
  for example in examples:
    prompt = _decoded(tiny_policy.tokenizer, example.prompt_ids)
    assert "max abs error" not in prompt and "wrong" in prompt


def test_held_out_tasks_are_refused(tiny_policy):
  held_out = kernels_pallas.resolve_tasks("gen:eval:1")
  with pytest.raises(ValueError, match="eval tasks may not"):
    self_repair.collect(tiny_policy, tiny_policy.params, _Env(), held_out,
                        RLConfig(max_new_tokens=8), num_samples=2)


def test_blocks_with_progress_sample_as_one_call(tiny_policy, monkeypatch):
  tasks = ["level1/relu", "level1/abs", "level1/relu", "level1/abs"]
  cfg = RLConfig(max_new_tokens=8)
  whole = _Env()
  self_repair.collect(tiny_policy, tiny_policy.params, whole, tasks, cfg,
                      num_samples=2, prompts_per_call=1)
  monkeypatch.setattr(self_repair, "PROGRESS_TASKS", 2)
  heard, blocked = [], _Env()
  self_repair.collect(tiny_policy, tiny_policy.params, blocked, tasks, cfg,
                      num_samples=2, prompts_per_call=1,
                      progress=lambda fmt, *a: heard.append(fmt % a))
  assert blocked.requests == whole.requests  # same rngs, same answers
  assert [h.split(",")[0] for h in heard] == [
      "self-repair: turn-1 answers on 2 of 4 tasks",
      "self-repair: turn-1 answers on 4 of 4 tasks"]

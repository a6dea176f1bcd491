"""Warm-start data and training on a tiny model with a scripted environment."""

import numpy as np
import pytest

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env.verdict import Status, Verdict
from leap_jax.model import config as model_config
from leap_jax.model import transformer
from leap_jax.rl import prompts
from leap_jax.warmstart import corpus, sft, sft_data
from leap_jax.warmstart import tokenizer as embedded

TASKS = ["level1/relu", "level1/row_sum"]


class _ScriptedEnv:
  """Says `wrong_output` to every mutant except the first (`ok`)."""

  def evaluate(self, requests):
    return [Verdict(t, Status.OK if i == 0 else Status.WRONG_OUTPUT, "Tolerances.")
            for i, (t, _) in enumerate(requests)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
  texts = corpus.task_texts([kernels_pallas.get_task(t) for t in TASKS])
  return embedded.train(texts, 400, tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def examples(tok):
  return sft_data.build(tok, TASKS, sft_data.judge(_ScriptedEnv(), TASKS),
                        embedded.stop_token_ids(tok)[0])


def test_examples_hold_solutions_and_real_feedback(tok, examples):
  kinds = [e.kind for e in examples]
  assert kinds.count("solution") == 2
  assert len(examples) >= 4  # repairs, minus the one the env called ok
  solution = tok.decode(examples[0].answer_ids[:-1])
  assert solution == candidate.fence(
      kernels_pallas.get_task(TASKS[0]).solution_candidate_source)
  repair = next(e for e in examples if e.kind != "solution")
  prompt = tok.decode(repair.prompt_ids)
  assert "Status: wrong_output" in prompt and "Fix the kernel" in prompt
  assert examples[0].answer_ids[-1] == embedded.stop_token_ids(tok)[0]


def test_eval_tasks_are_refused(tok):
  with pytest.raises(ValueError, match="eval"):
    sft_data.judge(_ScriptedEnv(), ["level1/softmax"])
  with pytest.raises(ValueError, match="eval"):
    sft_data.build(tok, ["level1/softmax"], [], 0)


def test_judging_in_blocks_reports_progress_and_judges_the_same(monkeypatch):
  class FailingEnv:
    calls = 0

    def evaluate(self, requests):
      FailingEnv.calls += 1
      return [Verdict(t, Status.WRONG_OUTPUT, f"bad {len(a)}")
              for t, a in requests]

  whole = sft_data.judge(FailingEnv(), TASKS)
  assert FailingEnv.calls == 1 and {j.task_id for j in whole} == set(TASKS)
  monkeypatch.setattr(sft_data, "PROGRESS_TASKS", 1)
  heard = []
  blocks = sft_data.judge(FailingEnv(), TASKS,
                          progress=lambda fmt, *a: heard.append(fmt % a))
  assert blocks == whole and FailingEnv.calls == 3
  first = sum(j.task_id == TASKS[0] for j in whole)
  assert len(heard) == 2
  assert heard[0].startswith(f"warm start data: mutants of 1 of 2 tasks "
                             f"judged, {first} failed")
  assert f"2 of 2 tasks judged, {len(whole)} failed" in heard[1]
  assert heard[1].endswith("ETA 0 s")


def test_training_lowers_the_answer_loss(tok, examples):
  cfg = model_config.ModelConfig(vocab_size=len(tok), embed_dim=64, num_layers=1,
                                 num_heads=2, num_kv_heads=1, head_dim=32,
                                 mlp_dim=128, max_position=4096)
  graphdef, state = transformer.init(cfg, 0)
  short = [sft_data.Example(e.task_id, e.kind, e.prompt_ids[-64:], e.answer_ids[:64])
           for e in examples]
  _, losses = sft.train(graphdef, state, short,
                        sft.SFTConfig(steps=12, batch_tokens=256, learning_rate=1e-2,
                                      seq_len=256), pad_id=tok.pad_token_id)
  assert np.isfinite(losses).all()
  assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])


def test_generated_tasks_get_solution_and_repair_examples(tmp_path):
  task_ids = kernels_pallas.resolve_tasks("gen:train:2")
  texts = corpus.task_texts([kernels_pallas.get_task(t) for t in task_ids])
  tok = embedded.train(texts, 400, tmp_path, split_lines=True)
  judged = sft_data.judge(_ScriptedEnv(), task_ids, repairs_per_task=2)
  examples = sft_data.build(tok, task_ids, judged,
                            embedded.stop_token_ids(tok)[0])
  assert [e.kind for e in examples].count("solution") == 2
  assert {e.task_id for e in examples} == set(task_ids)
  assert len(examples) == 2 + 2 * 2 - 1  # the env called the first mutant ok
  with pytest.raises(ValueError, match="eval"):
    sft_data.judge(_ScriptedEnv(), kernels_pallas.resolve_tasks("gen:eval:1"))


def test_a_task_judged_but_not_built_gives_repairs_only(tok, examples):
  """build(task_ids=[relu]) with row_sum's mutants judged too: row_sum
  appears only as repairs (sft.repair_only_tasks), relu as before."""
  judged = sft_data.judge(_ScriptedEnv(), TASKS)
  only_relu = sft_data.build(tok, TASKS[:1], judged,
                             embedded.stop_token_ids(tok)[0])
  row_sum = [e for e in only_relu if e.task_id == TASKS[1]]
  assert row_sum and all(e.kind != "solution" for e in row_sum)
  assert row_sum == [e for e in examples if e.task_id == TASKS[1]
                     and e.kind != "solution"]
  assert [e for e in only_relu if e.task_id == TASKS[0]] == [
      e for e in examples if e.task_id == TASKS[0]]

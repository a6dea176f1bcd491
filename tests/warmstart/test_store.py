"""The warm start on disk: made, loaded, refused when stale or missing."""

import json
import os

import jax
import numpy as np
import pytest

from configs import leap
from leap_jax.env.environment import EnvConfig
from leap_jax.env.verdict import Status, Verdict
from leap_jax.warmstart import store

TASKS = ["level1/relu", "level1/abs"]


class _WrongEnv:
  calls = 0
  config = EnvConfig()

  def evaluate(self, requests):
    _WrongEnv.calls += len(requests)
    return [Verdict(t, Status.WRONG_OUTPUT, "max abs error 1.0") for t, _ in requests]


def _config(directory):
  config = leap.get_config("smoke")
  config.sft.update(dir=str(directory), steps=6)
  return config


@pytest.fixture(scope="module")
def made(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("ws") / "warmstart")
  config = _config(directory)
  info = store.make(directory, config, TASKS, _WrongEnv())
  return directory, config, info


def test_make_writes_info_last_and_loads_back(made):
  directory, config, info = made
  assert sorted(os.listdir(directory)) == ["params", store.STAGE1_FILE,
                                           "tokenizer", store.INFO_FILE]
  assert info["examples"]["solution"] == 2
  assert sum(info["examples"].values()) == 2 + _WrongEnv.calls
  assert _WrongEnv.calls <= 2 * config.sft.repairs_per_task
  cfg, _, params, tok = store.load(directory, config, TASKS)
  assert cfg.vocab_size == len(tok) == config.model.vocab_size
  assert cfg.embed_dim == config.model.embed_dim and cfg.tie_embeddings
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))


def test_other_settings_are_refused_by_name(made):
  directory, config, _ = made
  config = _config(directory)
  config.sft.learning_rate = 0.5
  with pytest.raises(store.WarmStartError, match="sft.learning_rate"):
    store.load(directory, config, TASKS)
  with pytest.raises(store.WarmStartError, match="task_ids"):
    store.load(directory, _config(directory), TASKS[:1])


def test_rl_seeds_share_a_warm_start_through_sft_seed(made):
  """config.seed alone makes another warm start (refused by name); with
  sft.seed fixed to the one it was made with, any RL seed loads it."""
  directory, config, _ = made
  assert store.warm_start_seed(config) == config.seed == 0
  other = _config(directory)
  other.seed = 5
  assert store.warm_start_seed(other) == 5
  with pytest.raises(store.WarmStartError, match="seed: 0 there, 5 now"):
    store.load(directory, other, TASKS)
  other.sft.seed = 0
  assert store.warm_start_seed(other) == 0
  cfg, _, _, _ = store.load(directory, other, TASKS)
  assert cfg.vocab_size == config.model.vocab_size


def test_missing_or_incomplete_is_an_error(tmp_path):
  with pytest.raises(store.WarmStartError, match="no finished warm start"):
    store.load(str(tmp_path), _config(tmp_path), TASKS)


def test_eval_tasks_are_refused(tmp_path):
  import kernels_pallas
  with pytest.raises(ValueError, match="eval"):
    store.make(str(tmp_path / "w"), _config(tmp_path),
               kernels_pallas.task_ids("eval")[:1], _WrongEnv())


def test_info_is_json_with_losses(made):
  directory, _, info = made
  with open(os.path.join(directory, store.INFO_FILE)) as f:
    assert json.load(f) == info
  assert info["loss_last_quarter"] > 0


def test_a_setting_added_later_reads_as_its_default(made, tmp_path):
  directory, config, _ = made
  path = os.path.join(directory, store.INFO_FILE)
  with open(path) as f:
    info = json.load(f)
  old = json.loads(json.dumps(info))
  for field in store.ADDED_DEFAULTS["sft"]:  # made before the fields existed
    del old["settings"]["sft"][field]
  with open(path, "w") as f:
    json.dump(old, f)
  try:
    store.load(directory, config, TASKS)  # still ours: the default matches
    config = _config(directory)
    config.sft.split_lines = True
    with pytest.raises(store.WarmStartError, match="sft.split_lines"):
      store.load(directory, config, TASKS)
  finally:
    with open(path, "w") as f:
      json.dump(info, f)


def _self_repair_config(directory):
  """Warm start on relu; stage 2 on abs, the run's other training task."""
  config = _config(directory)
  config.sft.update(tasks="level1/relu", self_repair_steps=2,
                    self_repair_samples=2)
  # Its tokenizer saw relu only: abs's prompt is longer in its tokens.
  config.rl.update(max_prompt_tokens=320, max_seq_len=416)
  return config


class _RepairEnv(_WrongEnv):
  opened = 0

  def __enter__(self):
    _RepairEnv.opened += 1
    return self

  def __exit__(self, *exc):
    return False


class _NoStage1Env:
  def evaluate(self, requests):
    raise AssertionError("stage 1 was redone")


def test_self_repair_stage_adds_its_examples_and_steps(tmp_path):
  directory = str(tmp_path / "w")
  config = _self_repair_config(directory)
  repair_env = _RepairEnv()
  info = store.make(directory, config, TASKS, _WrongEnv(),
                    make_repair_env=lambda: repair_env)
  block = info["settings"]["self_repair"]
  assert block["task_ids"] == ["level1/abs"]  # sft.tasks' relu left out
  assert block["self_repair_steps"] == 2
  stage2 = info["self_repair"]
  # 2 turn-1 answers on abs, every one wrong: one example per distinct one.
  assert stage2["turn1_statuses"] == {"wrong_output": 2}
  assert 1 <= stage2["examples"]["self_repair"] <= 2
  assert stage2["examples"]["solution"] == 1
  assert sorted(os.listdir(os.path.join(directory, "params"))) == [
      str(config.sft.steps), str(config.sft.steps + 2)]
  store.load(directory, config, TASKS)
  # A crash after stage 2's save, before warmstart.json: stage 2 again.
  os.remove(os.path.join(directory, store.INFO_FILE))
  store.make(directory, config, TASKS, _NoStage1Env(),
             make_repair_env=_RepairEnv)
  store.load(directory, config, TASKS)
  # Stage 2's settings are checked like the rest.
  other = _self_repair_config(directory)
  other.sft.self_repair_samples = 3
  with pytest.raises(store.WarmStartError, match="self_repair.self_repair_samples"):
    store.load(directory, other, TASKS)
  off = _self_repair_config(directory)
  off.sft.self_repair_steps = 0
  with pytest.raises(store.WarmStartError, match="self_repair"):
    store.load(directory, off, TASKS)


def test_the_tokenizer_learns_the_feedback_when_asked(made, tmp_path):
  """sft.tokenizer_feedback: the env's feedback joins the tokenizer's corpus
  (fewer tokens for it than the default tokenizer's); off, the tokenizer is
  the task texts' alone, as before the setting existed."""
  from leap_jax.warmstart import corpus
  from leap_jax.warmstart import tokenizer as embedded
  import kernels_pallas
  directory, config, _ = made
  feedback = _WrongEnv().evaluate([("level1/relu", "")])[0].feedback
  _, _, _, plain = store.load(directory, config, TASKS)
  alone = embedded.train(corpus.task_texts(
      [kernels_pallas.get_task(t) for t in TASKS]), config.model.vocab_size,
                         tmp_path / "alone")
  assert plain.get_vocab() == alone.get_vocab()
  learnt_dir = str(tmp_path / "w")
  learnt_config = _config(learnt_dir)
  learnt_config.sft.tokenizer_feedback = True
  store.make(learnt_dir, learnt_config, TASKS, _WrongEnv())
  _, _, _, learnt = store.load(learnt_dir, learnt_config, TASKS)
  assert len(learnt.encode(feedback)) < len(plain.encode(feedback)) / 2
  with pytest.raises(store.WarmStartError, match="sft.tokenizer_feedback"):
    store.load(learnt_dir, config, TASKS)


def test_repair_only_specs_give_repairs_and_no_solution(made, tmp_path):
  """sft.repair_only_tasks: those specs' mutants are judged and learnt as
  repairs, their solutions never as a solution example; part of the warm
  start's identity, and no longer unseen for stage 2."""
  _, _, both = made  # relu and abs each with a solution and repairs
  directory = str(tmp_path / "w")
  config = _config(directory)
  config.sft.update(tasks="level1/relu", repair_only_tasks="level1/abs")
  assert store.settings(config, TASKS)["repair_only_task_ids"] == [
      "level1/abs"]
  info = store.make(directory, config, TASKS, _WrongEnv())
  assert info["examples"]["solution"] == 1
  assert ({k: n for k, n in info["examples"].items() if k != "solution"}
          == {k: n for k, n in both["examples"].items() if k != "solution"})
  store.load(directory, config, TASKS)
  unset = _config(directory)
  unset.sft.tasks = "level1/relu"
  with pytest.raises(store.WarmStartError, match="repair_only_task_ids"):
    store.load(directory, unset, TASKS)
  config.sft.self_repair_steps = 2  # abs is seen now: nothing left unseen
  with pytest.raises(ValueError, match="self_repair_tasks.*memorised"):
    store.settings(config, TASKS)


def test_self_repair_stage_resumes_after_a_crash(tmp_path):
  directory = str(tmp_path / "w")
  config = _self_repair_config(directory)

  class _Crash(_RepairEnv):
    def evaluate(self, requests):
      raise RuntimeError("preempted")

  with pytest.raises(RuntimeError, match="preempted"):
    store.make(directory, config, TASKS, _WrongEnv(),
               make_repair_env=_Crash)
  assert store.read_info(directory) is None  # unfinished: never loaded
  stage1 = store.read_info(directory, store.STAGE1_FILE)
  calls = _WrongEnv.calls

  info = store.make(directory, config, TASKS, _NoStage1Env(),
                    make_repair_env=_RepairEnv)
  assert _WrongEnv.calls - calls == 2  # stage 2's two answers only
  assert info["loss_last_quarter"] == stage1["loss_last_quarter"]
  store.load(directory, config, TASKS)
  # Stage 1 of other settings is not resumed: made anew.
  config.sft.learning_rate = 0.5
  with pytest.raises(AssertionError, match="redone"):
    store.make(directory, config, TASKS, _NoStage1Env(),
               make_repair_env=_RepairEnv)


def test_self_repair_needs_an_environment(tmp_path):
  config = _self_repair_config(tmp_path)
  with pytest.raises(ValueError, match="make_repair_env"):
    store.make(str(tmp_path / "w"), config, TASKS, _WrongEnv())


def test_ensure_fixes_trial_inputs_by_the_seed(tmp_path, monkeypatch):
  """Both of a build's environments get input_seed = config.seed, so two
  builds of one config judge the same inputs; an existing one opens none."""
  opened, made_with = [], []

  class _Env:
    def __init__(self, **kwargs):
      opened.append(kwargs)

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return False

  def fake_make(directory, config, task_ids, env, make_repair_env):
    made_with.append(env)
    make_repair_env()
  monkeypatch.setattr(store, "make", fake_make)
  monkeypatch.setattr(store, "load", lambda *args: "loaded")
  config = _config(tmp_path / "ws")
  config.seed = 7
  assert store.ensure(str(tmp_path / "ws"), config, TASKS, _Env) == "loaded"
  assert opened == [{"trusted": True, "input_seed": 7},
                    {"trusted": False, "input_seed": 7}]
  assert len(made_with) == 1
  monkeypatch.setattr(store, "read_info", lambda directory: {"done": True})
  opened.clear()
  store.ensure(str(tmp_path / "ws"), config, TASKS, _Env)
  assert opened == []
  # sft.seed, when set, is the warm start's seed, not the RL one.
  monkeypatch.setattr(store, "read_info", lambda directory: None)
  config.sft.seed = 3
  store.ensure(str(tmp_path / "ws"), config, TASKS, _Env)
  assert opened == [{"trusted": True, "input_seed": 3},
                    {"trusted": False, "input_seed": 3}]

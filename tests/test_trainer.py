"""The training loop on the smoke config: outputs, checkpoints, resumption,
rollout dumps, evaluation during training."""

import json
import os

import numpy as np
import pytest

from configs import leap
from leap_jax import rollout_dump, run_log, run_state, task_stream
from leap_jax import trainer as trainer_lib
from leap_jax.checkpoints import Checkpoints
from leap_jax.env import environment

STEP_KEYS = {"step", "acc@1", "acc@2", "turns_per_pass", "activated_groups",
             "seconds_rollout", "seconds_env", "seconds_update", "budgets",
             "env_calls", "tasks", "statuses", "turn1_ok", "turn1_judged",
             "response_length_mean", "response_length_max",
             "response_cut_share", "entropy", "tokens_per_second",
             "reward_mean", "reward_std", "advantage_mean", "advantage_std",
             "advantage_min", "advantage_max", "seconds_step"}
EVAL_KEYS = {"eval/acc@1", "eval/acc@2", "eval/turns_per_pass", "eval/tasks",
             "eval/levels", "seconds_eval"}


def smoke(tmp, workdir, **overrides):
  config = leap.get_config("smoke")
  config.sft.dir = str(tmp / "warmstart")
  config.update(overrides)
  return config, str(tmp / workdir)


def run(config, workdir, defaults=None):
  lines = []
  trainer = trainer_lib.Trainer(config, workdir, print_fn=lines.append,
                                defaults=defaults)
  try:
    return trainer.run(), lines
  finally:
    trainer.close()


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
  return tmp_path_factory.mktemp("trainer")


@pytest.fixture(scope="module")
def full_run(tmp):
  config, workdir = smoke(tmp, "full")
  defaults = leap.get_config("smoke")
  summary, lines = run(config, workdir, defaults)
  return workdir, summary, lines


def test_a_run_writes_metrics_checkpoints_plots(full_run):
  workdir, summary, lines = full_run
  rows = run_log.read_metrics(workdir)
  assert [r["step"] for r in rows] == [1, 2, 3]
  assert all(STEP_KEYS <= set(r) for r in rows)
  assert all(r["env_calls"] >= 8 for r in rows)  # P x G turn-1 answers
  assert Checkpoints(os.path.join(workdir, "checkpoints")).all_steps() == [0, 1, 2, 3]
  assert sorted(os.listdir(os.path.join(workdir, "plots"))) == [
      "acc.png", "budgets.png", "phases.png"]
  assert os.listdir(os.path.join(workdir, "tensorboard"))
  assert summary["step"] == 3 and "acc@1_last_quarter" in summary
  assert any(line.startswith("step 3/3 | acc@1") for line in lines)
  # Checkpoints hold params, optimizer state and RNG as separate items.
  assert set(run_state.ITEMS) <= set(
      os.listdir(os.path.join(workdir, "checkpoints", "3")))
  for r in rows:
    assert 0 <= r["response_cut_share"] <= 1 and r["entropy"] >= 0
    assert r["response_length_max"] >= r["response_length_mean"] > 0
    assert r["advantage_min"] <= r["advantage_mean"] <= r["advantage_max"]
    assert sum(r["statuses"].values()) == r["turns_sampled"]


def test_the_smoke_run_evaluates_once_at_its_last_step(full_run):
  workdir, summary, lines = full_run
  rows = run_log.read_metrics(workdir)
  assert [EVAL_KEYS <= set(r) for r in rows] == [False, False, True]
  last = rows[-1]
  # 2 tasks x 4 samples, up to 2 turns each, no pruning.
  assert last["eval/tasks"] == 2 and 0 <= last["eval/acc@1"] <= last["eval/acc@2"]
  assert set(last["eval/levels"]) == {"level1"}
  assert summary["eval"]["step"] == 3
  assert any(line.startswith("eval after step 3 | acc@1") for line in lines)


def test_rollouts_of_every_step_are_dumped(full_run):
  workdir, _, _ = full_run
  rows = run_log.read_metrics(workdir)
  assert rollout_dump.steps(workdir) == [1, 2, 3]
  for metrics in rows:
    dumped = rollout_dump.read(workdir, metrics["step"])
    assert len(dumped) == metrics["turns_sampled"]
    assert {d["task"] for d in dumped} == set(metrics["tasks"])
    counts = {}
    for d in dumped:
      counts[d["status"]] = counts.get(d["status"], 0) + 1
      assert d["answer"] and d["feedback"].startswith("Status: ")
      assert d["prompt_tokens"] > 0 and 0 < d["tokens"] <= 96
    assert counts == metrics["statuses"]
    # Advantages as the update used them: the trained turns are the
    # non-zero ones.
    assert sum(d["advantage"] != 0 for d in dumped) == metrics["trained_samples"]
    turn1 = [d for d in dumped if d["turn"] == 1]
    assert len(turn1) == 8  # P x G


def test_the_resolved_config_is_printed_and_written(full_run, tmp):
  workdir, _, lines = full_run
  with open(os.path.join(workdir, "config.json")) as f:
    saved = json.load(f)
  assert saved["rl"]["num_samples"] == 4 and saved["variant"] == "smoke"
  head = [l for l in lines if l.startswith("config: ")]
  assert head[0].startswith("config: 1 field(s) differ from the smoke")
  assert f'sft.dir = "{tmp / "warmstart"}"' in head[0]


def test_the_update_has_samples_to_train_on(full_run):
  workdir, _, _ = full_run
  rows = run_log.read_metrics(workdir)
  # The smoke warm start solves its two tasks often but not always, so
  # groups have mixed outcomes and the update has samples to train on.
  assert any(r["trained_samples"] > 0 for r in rows)
  assert all(np.isfinite(r["loss"]) for r in rows if r["trained_samples"])


def test_mini_batches_epochs_and_the_kl_term(tmp):
  config, workdir = smoke(tmp, "mini", num_steps=1)
  config.rl.mini_batches = 2
  config.rl.epochs = 2
  config.rl.kl_beta = 0.05
  run(config, workdir)
  row, = run_log.read_metrics(workdir)
  assert row["optimizer_steps"] == 4
  # Steps 2-4 take their ratio against the pre-update params' logprobs;
  # the KL is 0 on the first step (policy == reference) and > 0 later.
  assert np.isfinite(row["loss"]) and 0 <= row["clip_fraction"] <= 1
  assert 0 < row["kl"] < 1


def test_resuming_continues_exactly_where_it_stopped(tmp, full_run):
  config, workdir = smoke(tmp, "resumed", num_steps=2)
  run(config, workdir)
  config.num_steps = 3
  summary, lines = run(config, workdir)
  assert any("resuming from" in line and line.endswith("(data position 4)")
             for line in lines)
  resumed = run_log.read_metrics(workdir)
  full = run_log.read_metrics(full_run[0])
  assert [r["step"] for r in resumed] == [1, 2, 3]
  for key in ("tasks", "budgets", "acc@1", "acc@2", "statuses", "loss"):
    assert resumed[2].get(key) == full[2].get(key), key
  dumped = rollout_dump.read(workdir, 3)
  assert [d["answer"] for d in dumped] == [
      d["answer"] for d in rollout_dump.read(full_run[0], 3)]


def test_the_task_filter_skips_settled_tasks_and_resumes_with_its_state(tmp):
  """high=0.01: every judged task is settled, so each is skipped once
  (recheck_after=1) before it is drawn again. The logged steps replay
  through a TaskStream; a resume that lost the saved shares would draw step
  3 without skips."""
  config, workdir = smoke(tmp, "filtered", num_steps=2)
  config.task_filter.update(enabled=True, high=0.01, recheck_after=1)
  run(config, workdir)
  config.num_steps = 3
  run(config, workdir)
  rows = run_log.read_metrics(workdir)
  stream = task_stream.TaskStream(task_stream.training_tasks(
      config.train_tasks), config.seed, task_stream.TaskFilter(
          **config.task_filter))
  position = 0
  for row in rows:
    tasks, position, skipped = stream.draw(position, config.rl.num_prompts)
    assert (tasks, skipped) == (row["tasks"], row["tasks_skipped"])
    stream.record(tasks, row["turn1_ok"], row["turn1_judged"])
  assert [r["tasks_skipped"] for r in rows] == [0, 2, 2]
  meta, step = Checkpoints(os.path.join(workdir, "checkpoints")).read_meta()
  assert step == 3 and meta["data_position"] == position
  assert meta["task_stream"] == stream.state()


def test_a_refused_resume_names_every_field_that_differs(tmp, full_run):
  config, _ = smoke(tmp, "full", seed=5)
  config.model.embed_dim = 32
  with pytest.raises(ValueError) as e:
    trainer_lib.Trainer(config, full_run[0])
  assert "seed: 0 -> 5" in str(e.value)
  assert "model.embed_dim: 64 -> 32" in str(e.value)


def test_bad_config_values_are_named(tmp):
  config, workdir = smoke(tmp, "bad")
  config.rl.mode = "leapp"
  with pytest.raises(ValueError, match="leapp"):
    trainer_lib.Trainer(config, workdir)
  config, _ = smoke(tmp, "bad", num_steps=0)
  with pytest.raises(ValueError, match="num_steps"):
    trainer_lib.Trainer(config, workdir)


def test_missing_model_paths_and_tasks_fail_before_the_environment_starts(
    tmp, monkeypatch):
  started = []
  monkeypatch.setattr(trainer_lib, "make_env",
                      lambda *a, **k: started.append(1))
  config = leap.get_config("hf")
  with pytest.raises(ValueError, match="config.model.path is empty"):
    trainer_lib.Trainer(config, str(tmp / "hf"))
  config, workdir = smoke(tmp, "bad_eval", eval_tasks="level9")
  with pytest.raises(ValueError, match="eval_tasks: 'level9'"):
    trainer_lib.Trainer(config, workdir)
  assert not started


def test_eval_at_start_is_a_step_0_line_of_its_own(tmp, monkeypatch):
  inputs = []  # (input_seed, input_salt) of every environment call
  real_evaluate = environment.KernelEnv.evaluate

  def evaluate(env, *args, **kwargs):
    inputs.append((env.config.input_seed, env.config.input_salt))
    return real_evaluate(env, *args, **kwargs)

  monkeypatch.setattr(environment.KernelEnv, "evaluate", evaluate)
  config, workdir = smoke(tmp, "at_start", num_steps=1, eval_every=0,
                          eval_at_start=True, seed=3)
  config.sft.seed = 0  # the module's warm start
  summary, lines = run(config, workdir)
  # The evaluation's inputs are fixed by the run's seed (salted apart from
  # a warm-start build's), step 1's RL calls get fresh ones.
  run_calls = [c for c in inputs if c != (0, "")]  # less a warm-start build
  evals = run_calls.index((None, ""))
  assert evals > 0 and set(run_calls[:evals]) == {(3, "eval:")}
  assert set(run_calls[evals:]) == {(None, "")}
  rows = run_log.read_metrics(workdir)
  assert [r["step"] for r in rows] == [0, 1]
  assert set(rows[0]) == {"step", "seconds_eval"} | {
      k for k in rows[0] if k.startswith("eval/")}
  assert "eval/acc@1" in rows[0] and "eval/acc@1" not in rows[1]
  assert summary["acc@1_first_quarter"] == rows[1]["acc@1"]  # step 0 left out
  assert any(line.startswith("eval after step 0 |") for line in lines)

"""The training loop on the smoke config: outputs, checkpoints, resumption."""

import os

import numpy as np
import pytest

from configs import leap
from leap_jax import run_log, trainer as trainer_lib
from leap_jax.checkpoints import Checkpoints

STEP_KEYS = {"step", "acc@1", "acc@2", "turns_per_pass", "activated_groups",
             "seconds_rollout", "seconds_env", "seconds_update", "budgets",
             "env_calls", "tasks", "statuses", "turn1_ok"}


def smoke(tmp, workdir, **overrides):
  config = leap.get_config("smoke")
  config.sft.dir = str(tmp / "warmstart")
  config.update(overrides)
  return config, str(tmp / workdir)


def run(config, workdir):
  lines = []
  trainer = trainer_lib.Trainer(config, workdir, print_fn=lines.append)
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
  summary, lines = run(config, workdir)
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


def test_the_policy_learns_something(full_run):
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


def test_bad_config_values_are_named(tmp):
  config, workdir = smoke(tmp, "bad")
  config.rl.mode = "leapp"
  with pytest.raises(ValueError, match="leapp"):
    trainer_lib.Trainer(config, workdir)
  config, _ = smoke(tmp, "bad", num_steps=0)
  with pytest.raises(ValueError, match="num_steps"):
    trainer_lib.Trainer(config, workdir)


def test_config_changes_ignore_resumable_fields():
  a = leap.get_config("smoke")
  b = leap.get_config("smoke")
  b.num_steps = 99
  b.rl.learning_rate = 0.5
  assert trainer_lib.config_changes(a.to_json(), b) == [
      "rl.learning_rate: 0.001 -> 0.5"]

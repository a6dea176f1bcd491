"""Which training specs each part of the warm start learns from."""

import pytest

import kernels_pallas
from configs import leap
from leap_jax.warmstart import tasks

TASKS = ["level1/relu", "level1/abs"]


def _smoke():
  return leap.get_config("smoke")  # sft.tasks "": the run's tasks


def test_warm_start_tasks_from_the_sft_task_set():
  got = tasks.warm_start_tasks(leap.get_config(), ["level1/relu"])
  assert got == kernels_pallas.resolve_tasks("gen:train:600")
  config = _smoke()
  assert tasks.warm_start_tasks(config, TASKS) == TASKS
  config.sft.tasks = "gen:eval:3"
  with pytest.raises(ValueError, match="sft.tasks.*held out"):
    tasks.warm_start_tasks(config, TASKS)


def test_repair_only_specs_are_other_training_specs():
  config = _smoke()
  assert tasks.repair_only_tasks(config, TASKS) == []  # off
  config.sft.repair_only_tasks = "level1/relu,level1/col_mean"
  assert tasks.repair_only_tasks(config, TASKS) == ["level1/col_mean"]
  config.sft.repair_only_tasks = "level1/relu"  # only a seen spec
  with pytest.raises(ValueError, match="repair_only_tasks.*solutions of"):
    tasks.repair_only_tasks(config, TASKS)
  config.sft.repair_only_tasks = "gen:eval:2"
  with pytest.raises(ValueError, match="sft.repair_only_tasks.*held out"):
    tasks.repair_only_tasks(config, TASKS)


def test_self_repair_tasks_are_unseen_training_specs():
  config = _smoke()
  assert tasks.self_repair_tasks(config, TASKS) == []  # stage 2 off
  config.sft.self_repair_steps = 2
  with pytest.raises(ValueError, match="self_repair_tasks.*memorised"):
    tasks.self_repair_tasks(config, TASKS)  # "": the run's, all seen
  config.sft.self_repair_tasks = "level1/relu,level1/col_mean,level1/col_min"
  config.sft.repair_only_tasks = "level1/col_mean"  # seen through its repairs
  assert tasks.self_repair_tasks(config, TASKS) == ["level1/col_min"]
  config.sft.self_repair_tasks = "gen:eval:2"
  with pytest.raises(ValueError, match="sft.self_repair_tasks.*held out"):
    tasks.self_repair_tasks(config, TASKS)

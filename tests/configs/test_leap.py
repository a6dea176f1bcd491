import dataclasses

import pytest

from configs import leap
from kernels_pallas import task_sets
from leap_jax.rl.config import RLConfig
from leap_jax.task_stream import TaskFilter


def test_default_config_has_env_block_and_is_locked():
  config = leap.get_config()
  assert config.seed == 0 and config.env.backend == "auto"
  with pytest.raises(AttributeError):
    config.env.num_wrokers = 3  # a typo is an error, not a new field


def test_unknown_variant_is_named():
  with pytest.raises(ValueError, match="nope"):
    leap.get_config("nope")


def test_a_renamed_variant_says_where_it_went():
  with pytest.raises(ValueError, match="leap.py:testbed is now configs/leap.py"):
    leap.get_config("testbed")


@pytest.mark.parametrize("variant", leap.VARIANTS)
def test_every_rl_field_comes_from_rlconfig(variant):
  """One source of truth: every RLConfig field is settable, and a variant
  differs from RLConfig's defaults only where it says so."""
  config = leap.get_config(variant)
  fields = {f.name: f.default for f in dataclasses.fields(RLConfig)}
  assert set(config.rl) == set(fields)
  changed = {k for k, v in config.rl.items() if v != fields[k]}
  embedded = {"max_new_tokens", "max_prompt_tokens", "max_seq_len",
              "learning_rate", "negative_max_prob", "epochs"}
  smoke = {"num_prompts", "num_samples", "max_turns", "micro_batch_rows"}
  assert changed == {"": embedded - {"epochs"} | {"temperature"},
                     "level1": embedded | {"temperature"},
                     "smoke": embedded - {"epochs"} | smoke,
                     "bench": embedded - {"epochs"} | {"temperature"},
                     "hf": {"remat"},
                     "smollm2": {"remat"}}.get(variant, set())
  # LEAP's objective everywhere: negatives kept (issue 19), under a
  # ceiling on the embedded policy.
  assert config.rl.negative_weight == 1.0
  # The measured settings (configs/leap.py says where each was measured).
  assert (config.rl.learning_rate, config.rl.epochs) == {
      "level1": (1e-4, 4), "": (3e-4, 1), "bench": (3e-4, 1),
      "smoke": (1e-3, 1)}.get(variant, (fields["learning_rate"],
                                        fields["epochs"]))
  RLConfig(**config.rl.to_dict())  # valid as it stands
  config.rl.b2 = 0.95  # formerly not settable from the command line
  config.rl.fast_ps = (1.0, 3.0)


@pytest.mark.parametrize("variant", leap.VARIANTS)
def test_the_task_filter_comes_from_its_dataclass_and_is_off(variant):
  task_filter = leap.get_config(variant).task_filter
  assert TaskFilter(**task_filter) == TaskFilter()
  assert not task_filter.enabled


def test_level1_revisits_sixteen_level1_tasks_from_a_warm_start_on_all():
  config = leap.get_config("level1")
  rl_ids = task_sets.resolve_tasks(config.train_tasks, "train")
  sft_ids = task_sets.resolve_tasks(config.sft.tasks, "train")
  assert rl_ids == list(leap.LEVEL1_MIXED) and len(rl_ids) == 16
  assert len(sft_ids) == 48 and set(rl_ids) < set(sft_ids)
  # 8 prompts a step: every two steps meet each of the 16 tasks once.
  assert config.rl.num_prompts * 2 == len(rl_ids)
  # Other variants keep their own task sets and warm starts.
  assert leap.get_config().sft.tasks == "gen:train:600"
  assert leap.get_config().train_tasks == "gen:train"
  # Each embedded variant caches its own warm start.
  embedded = ("", "level1", "bench", "smoke")
  assert len({leap.get_config(v).sft.dir for v in embedded}) == len(embedded)
  assert leap.get_config("hf").train_tasks == "train"
  assert not leap.get_config("hf").sft.tasks


def test_only_the_generated_families_learn_the_feedback_in_the_tokenizer():
  """The testbed's warm starts (and so the benchmark's) train the tokenizer
  on the feedback too; :level1 keeps the warm start it was measured
  with."""
  on = {v: leap.get_config(v).sft.tokenizer_feedback for v in leap.VARIANTS}
  assert on == {"": True, "level1": False, "bench": True, "smollm2": False,
                "hf": False, "smoke": False}


def test_smoke_dumps_every_step_and_evaluates_at_its_last():
  config = leap.get_config("smoke")
  assert config.rollouts_every == 1 and config.eval_every == config.num_steps
  assert not config.eval_at_start
  level1 = leap.get_config("level1")
  assert level1.eval_every == 8 and level1.eval_at_start
  default = leap.get_config()  # the testbed: held-out specs before and after
  assert default.rollouts_every == 1
  assert default.eval_at_start and default.eval_every == default.num_steps
  assert default.eval_tasks == "gen:eval:48"
  assert not leap.get_config("bench").eval_every  # leap_vs_full evaluates
  assert not default.wandb_project  # off unless asked

"""Task-set names -> ids."""

import pytest

import kernels_pallas
from kernels_pallas import generated


def test_suite_split_names():
  assert kernels_pallas.resolve_tasks("train") == kernels_pallas.task_ids("train")
  assert kernels_pallas.resolve_tasks("eval") == kernels_pallas.task_ids("eval")
  assert kernels_pallas.resolve_tasks("all") == kernels_pallas.task_ids()


def test_generated_sets_and_counts():
  assert kernels_pallas.resolve_tasks("gen:eval") == generated.task_ids("eval")
  first = kernels_pallas.resolve_tasks("gen:eval:6")
  assert first == generated.task_ids("eval")[:6]
  assert {t.split("/")[1] for t in first} == set(generated.FAMILIES)
  assert len(kernels_pallas.resolve_tasks("gen:all")) == len(generated.task_ids())
  for bad in ("gen:test", "gen:eval:0", "gen:eval:x"):
    with pytest.raises(ValueError):
      kernels_pallas.resolve_tasks(bad)


def test_ids_prefixes_order_and_repeats():
  ew = generated.task_ids("train", "ew_chain")
  got = kernels_pallas.resolve_tasks(f"level1/relu, {ew[0]}, level1/relu")
  assert got == ["level1/relu", ew[0]]
  family = kernels_pallas.resolve_tasks("gen/row_reduce")
  assert set(family) == set(generated.task_ids(family="row_reduce"))
  level1 = kernels_pallas.resolve_tasks("level1")
  assert level1 and all(t.startswith("level1/") for t in level1)
  with pytest.raises(ValueError, match="names no task"):
    kernels_pallas.resolve_tasks("level9")
  with pytest.raises(ValueError, match="empty"):
    kernels_pallas.resolve_tasks(" , ")


def test_a_split_filters_prefixes_and_refuses_the_other_split():
  train_ew = kernels_pallas.resolve_tasks("gen/ew_chain", split="train")
  assert train_ew == [t for t in generated.task_ids(family="ew_chain")
                      if t in set(generated.task_ids("train"))]
  held_out = generated.task_ids("eval")[0]
  for spec in ("gen:eval", "gen:all", "eval", held_out,
               kernels_pallas.task_ids("eval")[0]):
    with pytest.raises(ValueError, match="held out"):
      kernels_pallas.resolve_tasks(spec, split="train")
  assert kernels_pallas.split_of(held_out) == "eval"


def test_eval_set_for_a_training_spec():
  assert kernels_pallas.eval_set_for("level1") == "eval"
  assert kernels_pallas.eval_set_for("gen:train") == "gen:eval"
  assert kernels_pallas.eval_set_for("level1/relu,gen:train:3") == (
      "eval,gen:eval")

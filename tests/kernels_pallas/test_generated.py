"""The generated families as a whole: counts, stable ids, the split by spec,
registry integration, and a seeded sample of solutions through the real
environment (interpret mode + Triton lowering check)."""

import hashlib
import random

import pytest

import kernels_pallas
from kernels_pallas import generated
from leap_jax.env import candidate, environment
from leap_jax.env import pool as pool_lib
from leap_jax.env.verdict import Status

# The id lists are part of the contract (runs name tasks by id, the split
# must not move): a change here means the families changed.
FIRST_IDS = {
    "ew_chain": "gen/ew_chain/mul_z-neg/128x1024",
    "row_reduce": "gen/row_reduce/neg-center_min-silu/256x512",
    "matmul_epilogue": "gen/matmul_epilogue/neg/256x128x64",
}


def test_counts_and_distinct_ids():
  for family, module in generated.FAMILIES.items():
    ids = [i.task_id for i in generated.instances(family)]
    assert len(ids) == module.COUNT == len(set(ids))
    assert ids[0] == FIRST_IDS[family]
    assert all(t.startswith(f"gen/{family}/") for t in ids)
  assert len(generated.task_ids()) >= 2000


def test_enumeration_is_stable_across_calls():
  ids = "\n".join(generated.task_ids()).encode()
  generated.instances.cache_clear()
  generated._by_id.cache_clear()
  assert hashlib.sha256("\n".join(generated.task_ids()).encode()).digest() == (
      hashlib.sha256(ids).digest())


def test_split_is_by_spec():
  for family, module in generated.FAMILIES.items():
    train = [i for i in generated.instances(family) if not generated.held_out(i)]
    evals = [i for i in generated.instances(family) if generated.held_out(i)]
    assert 0.15 < len(evals) / module.COUNT < 0.45, family
    # Held-out combinations and shapes never reach training.
    train_combos = {i.combination for i in train}
    for inst in evals:
      assert (inst.combination not in train_combos
              or inst.shape in module.HELD_OUT_SHAPES)
    assert not {i.shape for i in train} & module.HELD_OUT_SHAPES
    assert {i.shape for i in evals} & module.HELD_OUT_SHAPES


def test_task_ids_interleave_families_and_partition():
  ids = generated.task_ids("eval")
  families = [t.split("/")[1] for t in ids[:3]]
  assert families == list(generated.FAMILIES)
  assert set(ids) | set(generated.task_ids("train")) == set(generated.task_ids())
  assert not set(ids) & set(generated.task_ids("train"))
  with pytest.raises(ValueError, match="split"):
    generated.task_ids("test")
  with pytest.raises(ValueError, match="family"):
    generated.task_ids(family="conv")


def test_registry_serves_generated_tasks():
  task_id = generated.task_ids("eval")[0]
  task = kernels_pallas.get_task(task_id)
  assert task.split == "eval" and task.task_id == task_id
  assert task.reference_source.startswith("def reference(")
  assert task.solution_candidate_source == task.candidate_text
  assert "def kernel(" in task.solution_candidate_source
  assert [s.shape for s in task.input_shapes()] == [
      shape for _, shape, _ in generated.instance(task_id).inputs]
  with pytest.raises(KeyError, match="unknown generated task"):
    kernels_pallas.get_task("gen/ew_chain/nope/1x1")
  assert not any(t.startswith("gen/") for t in kernels_pallas.task_ids())


def _sample(n_per_family: int, seed: int = 0) -> list[str]:
  rng = random.Random(seed)
  return [t for f in generated.FAMILIES
          for t in rng.sample(generated.task_ids(family=f), n_per_family)]


@pytest.fixture(scope="module")
def sample_verdicts():
  ids = _sample(4)
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(deadline_s=120),
                                 check_lowering=True)
  answers = [candidate.fence(kernels_pallas.get_task(t).solution_candidate_source)
             for t in ids]
  with environment.KernelEnv(config) as env:
    return dict(zip(ids, env.evaluate(list(zip(ids, answers)))))


def test_sampled_solutions_are_ok_in_the_environment(sample_verdicts):
  # benchmarks/generated_tasks.py runs every one of them.
  bad = {t: v.feedback for t, v in sample_verdicts.items()
         if v.status is not Status.OK}
  assert not bad

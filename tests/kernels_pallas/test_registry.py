"""The task registry: ids, the train/eval split, lookup errors, shapes."""

import ast
import inspect

import jax
import jax.numpy as jnp
import pytest

import kernels_pallas as kp
from kernels_pallas import registry

REQUIRED_IDS = {
    "level1/vector_add", "level1/relu", "level1/matmul", "level1/softmax",
    "level1/layer_norm", "level1/row_sum", "level1/gelu", "level1/col_sum",
    "level1/sigmoid", "level1/matvec", "level1/batched_matmul",
    "level1/row_max", "level1/transpose_matmul",
    "level2/matmul_bias_relu", "level2/rmsnorm_residual", "level2/matmul_gelu",
    "level2/softmax_matmul", "level2/swiglu",
    "level3/attention", "level3/causal_attention", "level3/mlp_block",
    "level3/gqa_attention",
}

# What a solution module may import; `_blocks` serves make_inputs and the
# tolerances only (checked below), never the solution a model sees.
ALLOWED_IMPORTS = {"jax", "jax.numpy", "jax.experimental.pallas", "functools",
                   "math", "kernels_pallas._blocks"}


def test_ids_cover_the_suite():
  ids = kp.task_ids()
  assert ids == sorted(ids)
  assert REQUIRED_IDS <= set(ids)
  assert len(ids) >= 20
  for task in kp.all_tasks():
    assert task.task_id.startswith(f"level{task.level}/")


def test_every_eval_id_exists():
  assert registry.EVAL_TASK_IDS <= set(kp.task_ids())


@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_level_in_both_splits(level):
  for split in ("train", "eval"):
    levels = {kp.get_task(t).level for t in kp.task_ids(split)}
    assert level in levels, (split, level)


def test_splits_partition_the_suite():
  train, evals = set(kp.task_ids("train")), set(kp.task_ids("eval"))
  assert not train & evals
  assert train | evals == set(kp.task_ids())
  assert evals == registry.EVAL_TASK_IDS


def test_unknown_id_and_split_raise():
  with pytest.raises(KeyError, match="unknown task 'level1/nope'"):
    kp.get_task("level1/nope")
  with pytest.raises(ValueError, match="split"):
    kp.task_ids("test")


@pytest.mark.parametrize("task_id", kp.task_ids())
def test_input_shapes_match_make_inputs(task_id):
  task = kp.get_task(task_id)
  shapes = task.input_shapes()
  inputs = task.make_inputs(jax.random.key(0))
  assert [(s.shape, s.dtype) for s in shapes] == [
      (x.shape, x.dtype) for x in inputs]
  for s in shapes:
    assert s.dtype in (jnp.float32, jnp.bfloat16, jnp.int32), s.dtype
    # Powers of two, so blocks tile them; 3 is a convolution's kernel size.
    assert all(d == 3 or (d > 0 and d & (d - 1) == 0) for d in s.shape), (
        s.shape)


@pytest.mark.parametrize("task_id", kp.task_ids())
def test_description_states_every_shape(task_id):
  # Descriptions are written by hand; catch drift from the real shapes.
  task = kp.get_task(task_id)
  out = jax.eval_shape(task.reference, *task.input_shapes())
  for s in (*task.input_shapes(), *jax.tree.leaves(out)):
    assert str(list(s.shape)) in task.description, s.shape
    assert jnp.dtype(s.dtype).name in task.description, s.dtype


@pytest.mark.parametrize("task_id", kp.task_ids())
def test_module_imports_and_solution_are_self_contained(task_id):
  module = inspect.getmodule(kp.get_task(task_id).solution)
  tree = ast.parse(inspect.getsource(module))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      assert {a.name for a in node.names} <= ALLOWED_IMPORTS
    elif isinstance(node, ast.ImportFrom):
      assert {f"{node.module}.{a.name}" for a in node.names} <= ALLOWED_IMPORTS
    elif isinstance(node, ast.keyword):
      assert node.arg != "interpret"
  for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name != "make_inputs":
      names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
      assert "_blocks" not in names, node.name

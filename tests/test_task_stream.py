import kernels_pallas
import pytest
from hypothesis import given, strategies as st

from leap_jax import task_stream

TASKS = [f"t{i}" for i in range(5)]


def test_each_epoch_is_a_permutation_and_epochs_differ():
  first = task_stream.tasks_at(TASKS, 0, 0, 5)
  second = task_stream.tasks_at(TASKS, 0, 5, 5)
  assert sorted(first) == TASKS and sorted(second) == TASKS
  assert first != second or first != task_stream.tasks_at(TASKS, 0, 10, 5)
  assert task_stream.tasks_at(TASKS, 1, 0, 5) != first


@given(st.integers(0, 40), st.integers(0, 12), st.integers(0, 12))
def test_resuming_at_a_position_continues_the_same_stream(start, a, b):
  whole = task_stream.tasks_at(TASKS, 3, start, a + b)
  assert whole == (task_stream.tasks_at(TASKS, 3, start, a)
                   + task_stream.tasks_at(TASKS, 3, start + a, b))


def test_no_tasks_is_an_error():
  import pytest
  with pytest.raises(ValueError, match="no tasks"):
    task_stream.tasks_at([], 0, 0, 1)


def test_training_tasks_by_split_prefix_and_id():
  import kernels_pallas
  import pytest
  train = kernels_pallas.task_ids("train")
  assert task_stream.training_tasks("train") == train
  level1 = task_stream.training_tasks("level1")
  assert level1 and all(t.startswith("level1/") for t in level1)
  assert set(level1) <= set(train)
  assert task_stream.training_tasks("level1/relu, level1/relu") == ["level1/relu"]
  with pytest.raises(ValueError, match="held out"):
    task_stream.training_tasks(kernels_pallas.task_ids("eval")[0])
  with pytest.raises(ValueError, match="names no training task"):
    task_stream.training_tasks("level9")


def test_eval_tasks_split_and_names():
  held_out = kernels_pallas.task_ids("eval")
  assert task_stream.eval_tasks("eval") == held_out
  assert task_stream.eval_tasks("all") == kernels_pallas.task_ids()
  level1 = task_stream.eval_tasks("eval", "level1")
  assert level1 == [t for t in held_out if t.startswith("level1/")]
  assert task_stream.eval_tasks("train", "level1/relu, level1/abs") == [
      "level1/relu", "level1/abs"]
  with pytest.raises(ValueError, match="eval_split must be one of"):
    task_stream.eval_tasks("test")
  with pytest.raises(ValueError, match="names no task of the eval split"):
    task_stream.eval_tasks("eval", "level1/relu")  # a training task


def test_eval_tasks_takes_a_named_set_of_the_split():
  # gen:eval:6 is the first six held-out generated tasks (balanced over the
  # families), the testbed's evaluation set in miniature.
  six = kernels_pallas.resolve_tasks("gen:eval:6")
  assert task_stream.eval_tasks("eval", "gen:eval:6", "gen:train") == six
  assert len(six) == 6 and len({t.split("/")[1] for t in six}) == 3
  with pytest.raises(ValueError, match="names no task of the eval split"):
    task_stream.eval_tasks("eval", "gen:train:3", "gen:train")
  with pytest.raises(ValueError, match="eval_tasks: .*count after the split"):
    task_stream.eval_tasks("eval", "gen:eval:x", "gen:train")

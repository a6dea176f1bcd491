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
  with pytest.raises(ValueError, match="^train_tasks: .*names no training task"):
    task_stream.training_tasks("level9")
  with pytest.raises(ValueError, match="^sft.tasks: "):  # the field it names
    task_stream.training_tasks("level9", "sft.tasks")


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


def _stream(shares=None, **kw):
  stream = task_stream.TaskStream(TASKS, 3, task_stream.TaskFilter(**kw))
  stream.shares.update(shares or {})
  return stream


def test_a_stream_without_its_filter_is_the_plain_order():
  stream = _stream({t: 1.0 for t in TASKS})  # settled, but the filter is off
  tasks, position, skipped = stream.draw(7, 4)
  assert tasks == task_stream.tasks_at(TASKS, 3, 7, 4)
  assert (position, skipped) == (11, 0)


def test_the_filter_skips_tasks_settled_last_time():
  order = task_stream.tasks_at(TASKS, 3, 0, 5)
  # The first two in the order were all right / all wrong last time; the
  # third was mixed; the last two were never drawn.
  shares = {order[0]: 1.0, order[1]: 0.0, order[2]: 0.5}
  stream = _stream(shares, enabled=True)
  tasks, position, skipped = stream.draw(0, 3)
  assert tasks == order[2:5]
  assert (position, skipped) == (5, 2)
  assert stream.skips == {order[0]: 1, order[1]: 1}


def test_bounds_are_strict_and_set_by_low_and_high():
  order = task_stream.tasks_at(TASKS, 3, 0, 5)
  stream = _stream({order[0]: 0.25, order[1]: 0.75, order[2]: 0.5},
                   enabled=True, low=0.25, high=0.75)
  tasks, _, skipped = stream.draw(0, 1)
  assert tasks == [order[2]] and skipped == 2


def test_a_skipped_task_comes_back_after_recheck_after_skips():
  (first,) = task_stream.tasks_at(TASKS, 3, 0, 1)
  stream = _stream({first: 1.0}, enabled=True, recheck_after=2)
  position, draws, skips_seen = 0, [], 0
  while first not in draws:
    (task,), position, skipped = stream.draw(position, 1)
    draws.append(task)
    skips_seen += skipped
  # Met three times: skipped twice, drawn the third.
  assert skips_seen == 2 and stream.skips[first] == 2
  assert draws.count(first) == 1
  # Drawn and judged: its skips start again from its new share.
  stream.record([first], [3], [4])
  assert stream.shares[first] == 0.75 and stream.skips[first] == 0


def test_record_counts_judged_samples_only():
  stream = _stream(enabled=True)
  stream.record(["t0", "t1", "t2"], [2, 0, 0], [4, 3, 0])
  # t0: 2 of 4; t1: 0 of 3 (one harness_error not counted); t2: none judged
  assert stream.shares == {"t0": 0.5, "t1": 0.0}
  with pytest.raises(ValueError):
    stream.record(["t0"], [1, 2], [4, 4])


@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, None]), min_size=5,
                max_size=5), st.integers(1, 3), st.integers(0, 30),
       st.integers(1, 12))
def test_draws_end_and_resume_from_the_saved_state(shares, recheck, start,
                                                   count):
  stream = _stream({t: s for t, s in zip(TASKS, shares) if s is not None},
                   enabled=True, recheck_after=recheck)
  saved = stream.state()
  tasks, position, skipped = stream.draw(start, count)
  assert len(tasks) == count and position - start == count + skipped
  assert skipped <= len(TASKS) * recheck
  assert all(s is None or 0 < s < 1 or stream.skips[t] == recheck
             for t, s in ((t, shares[TASKS.index(t)]) for t in tasks))
  # A stream rebuilt from the checkpointed state draws the same.
  again = task_stream.TaskStream(TASKS, 3, stream.filter, saved)
  assert again.draw(start, count) == (tasks, position, skipped)
  assert again.state() == stream.state()


@pytest.mark.parametrize("kw,match", [
    ({"low": 0.6, "high": 0.4}, "low < high"),
    ({"high": 1.5}, "low < high"),
    ({"recheck_after": 0}, "recheck_after")])
def test_a_bad_filter_is_a_config_error(kw, match):
  with pytest.raises(ValueError, match=match):
    task_stream.TaskFilter(**kw)

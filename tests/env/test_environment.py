"""Every verdict the environment can reach, through one real pool."""

import dataclasses

import jax
import numpy as np
import pytest

import kernels_pallas
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import timing as timing_lib
from leap_jax.env import wire
from leap_jax.env.verdict import Status
from tests.env.conftest import vector_add

TASK = "level1/vector_add"

CASES = {
    "ok": (vector_add(), Status.OK),
    "wrong_output": (vector_add("x_ref[...] - y_ref[...]"), Status.WRONG_OUTPUT),
    "nan": (vector_add("x_ref[...] * jnp.nan", "import jax.numpy as jnp\n"),
            Status.WRONG_OUTPUT),
    "no_code": ("I would rather not.", Status.NO_CODE),
    "syntax_error": ("```python\ndef kernel(x, y):\n  return (x\n```", Status.SYNTAX_ERROR),
    "missing_entry_point": (vector_add().replace("def kernel", "def kern"),
                            Status.MISSING_ENTRY_POINT),
    "entry_not_callable": ("```python\nkernel = 3\n```", Status.MISSING_ENTRY_POINT),
    "forbidden": ("```python\nimport os\ndef kernel(x, y):\n  return x\n```",
                  Status.FORBIDDEN),
    "no_kernel": ("```python\ndef kernel(x, y):\n  return x + y\n```", Status.NO_KERNEL),
    "compute_outside_kernel": (
        vector_add().replace("(x, y)\n```", "(x, y) * 1.0 + 0.0\n```"),
        Status.COMPUTE_OUTSIDE_KERNEL),
    "lowering_error": (vector_add("x_ref[...] + y_ref[...] + 0.0 * jnp.sort(x_ref[...])",
                                  "import jax.numpy as jnp\n"), Status.LOWERING_ERROR),
    "runtime_error": (vector_add().replace("(8192,), lambda i: (i,)",
                                           "(8192, 2), lambda i: (i,)"),
                      Status.RUNTIME_ERROR),
    "timeout": (vector_add().replace("def kernel(x, y):\n",
                                     "def kernel(x, y):\n  while True:\n    pass\n"),
                Status.TIMEOUT),
    "wrong_structure": (vector_add().replace("(x, y)\n```", "(x, y), x\n```"),
                        Status.WRONG_OUTPUT),
}


@pytest.fixture(scope="module")
def env():
  config = environment.EnvConfig(
      pool=pool_lib.PoolConfig(num_workers=2, deadline_s=15),
      timing_config=timing_lib.TimingConfig(rounds=6, max_seconds=3),
      calibration_tasks=(TASK,), calibration_repeats=2)
  with environment.KernelEnv(config) as kernel_env:
    yield kernel_env


@pytest.fixture(scope="module")
def verdicts(env):
  names = list(CASES)
  results = env.evaluate([(TASK, CASES[n][0]) for n in names])
  return dict(zip(names, results))


@pytest.mark.parametrize("name", list(CASES))
def test_status(verdicts, name):
  verdict = verdicts[name]
  assert verdict.status is CASES[name][1], verdict.feedback
  assert verdict.task_id == TASK
  assert verdict.feedback.startswith(f"Status: {verdict.status.value}.")


def test_feedback_details(verdicts):
  assert "mismatched elements 100.00%" in verdicts["wrong_output"].feedback
  assert "NaN" in verdicts["nan"].feedback
  assert "sort" in verdicts["lowering_error"].feedback
  assert "add" in verdicts["compute_outside_kernel"].feedback
  assert "import of 'os'" in verdicts["forbidden"].feedback
  assert "/work" not in verdicts["runtime_error"].feedback


def test_timing_is_calibrated_and_labelled(env):
  (verdict,) = env.evaluate([(TASK, vector_add())], timing_on=True)
  assert verdict.status is Status.OK
  assert env.band is not None and 0 < env.band < 1
  assert set(env.task_bands) == {TASK}  # the calibration task's own band
  assert env.band_for(TASK) == env.task_bands[TASK]
  assert env.band_for("level1/relu") == env.band  # pooled where unmeasured
  t = verdict.timing
  assert t.band == env.band_for(TASK)
  assert t.interpret and t.rounds >= 5 and t.ci_low <= t.raw_speedup <= t.ci_high
  assert "interpret mode on CPU" in verdict.feedback
  assert verdict.to_json()["speedup"] == t.speedup


def test_unknown_task_is_a_clear_error(env):
  with pytest.raises(KeyError, match="unknown task"):
    env.evaluate([("level9/nope", vector_add())])


def test_pool_is_back_to_full_size_after_all_of_that(env):
  (verdict,) = env.evaluate([(TASK, vector_add())])
  assert verdict.status is Status.OK
  assert env.pool.live_workers() == env.pool.size


# What a worker sends is checked before use: these messages never reach a
# worker pool, they are fed to the judge and the timing parser directly.

@pytest.fixture(scope="module")
def bare_env():
  with environment.KernelEnv(environment.EnvConfig(
      pool=pool_lib.PoolConfig(num_workers=1))) as kernel_env:
    yield kernel_env


def _honest_message(batch):
  arrays = [o.copy() for outs in batch.reference_outputs for o in outs]
  return {"treedef": batch.treedef, "leaves": batch.leaves}, arrays


def test_judge_accepts_the_reference_itself(bare_env):
  batch = bare_env._task_batch(kernels_pallas.get_task(TASK))  # noqa: SLF001
  header, arrays = _honest_message(batch)
  result, want_timing = bare_env._judge(batch, True)(header, arrays)  # noqa: SLF001
  assert result.status is Status.OK and want_timing


def _forged(batch, how):
  header, arrays = _honest_message(batch)
  if how == "shape_differs_from_header":
    arrays[0] = arrays[0][:-1]
  elif how == "dtype_differs_from_header":
    arrays[0] = arrays[0].astype(np.float16)
  elif how == "extra_array":
    arrays.append(arrays[0])
  elif how == "missing_array":
    arrays.pop()
  elif how == "header_lies_about_shape":
    header["leaves"] = [[[7], "float32"]]
  elif how == "leaves_not_a_list":
    header["leaves"] = {"a": 1}
  elif how == "no_treedef":
    del header["treedef"]
  elif how == "scalar_for_array":
    arrays[0] = np.float32(1.0)
  return header, arrays


@pytest.mark.parametrize("how", [
    "shape_differs_from_header", "dtype_differs_from_header", "extra_array",
    "missing_array", "header_lies_about_shape", "leaves_not_a_list",
    "no_treedef", "scalar_for_array"])
def test_judge_turns_any_forged_message_into_wrong_output(bare_env, how):
  batch = bare_env._task_batch(kernels_pallas.get_task(TASK))  # noqa: SLF001
  result, want_timing = bare_env._judge(batch, True)(*_forged(batch, how))  # noqa: SLF001
  assert result.status is Status.WRONG_OUTPUT and not want_timing


def test_message_cap_is_the_outputs_bytes_plus_a_header(bare_env):
  batch = bare_env._task_batch(kernels_pallas.get_task(TASK))  # noqa: SLF001
  out_bytes = sum(o.nbytes for outs in batch.reference_outputs for o in outs)
  job = bare_env._job(batch, "")  # noqa: SLF001
  assert job["max_message_bytes"] == wire.message_cap(out_bytes)
  assert out_bytes < job["max_message_bytes"] < out_bytes + (2 << 20)


@pytest.mark.parametrize("message", [
    {}, {"a_seconds": [1e-3], "b_seconds": []},
    {"a_seconds": [1e-3] * 2, "b_seconds": [0.0, 1e-3]},
    {"a_seconds": [1e-3], "b_seconds": [float("nan")]},
    {"a_seconds": [1e-3], "b_seconds": ["1e-3"]},
    {"a_seconds": [1e-3], "b_seconds": [True]},
    {"a_seconds": [1e-3] * 999, "b_seconds": [1e-3] * 999}])
def test_malformed_timing_is_refused(bare_env, message):
  assert bare_env._timing(message, 0.0) is None  # noqa: SLF001


def test_answer_over_the_size_cap_is_no_code_without_reading_it(bare_env):
  (verdict,) = bare_env.evaluate([(TASK, "```python\n" + "#" * (1 << 18))])
  assert verdict.status is Status.NO_CODE
  assert "over the limit" in verdict.detail


def test_reference_infinities_must_be_matched_exactly(bare_env):
  batch = bare_env._task_batch(kernels_pallas.get_task(TASK))  # noqa: SLF001
  for outs in batch.reference_outputs:  # a reference that overflows somewhere
    outs[0][:3] = [np.inf, -np.inf, np.nan]
  header, arrays = _honest_message(batch)
  judge = bare_env._judge(batch, False)  # noqa: SLF001
  assert judge(header, arrays)[0].status is Status.OK
  for a in arrays:
    a[:3] = [3.0e38, -3.0e38, 0.0]  # finite, and "close" to inf by rtol
  result, _ = judge(header, arrays)
  assert result.status is Status.WRONG_OUTPUT
  assert "not matched exactly" in result.detail


# input_seed (warm-start builds; evaluations through fixed_inputs): a task's
# trial inputs, and so the error figures of its feedback, are the same on
# every call; without it they are fresh on every call (what keeps RL answers
# from fitting known inputs).

def _inputs(env):
  return env._task_batch(kernels_pallas.get_task(TASK)).inputs  # noqa: SLF001


def _same(a, b):
  return all(np.array_equal(x, y) for ta, tb in zip(a, b) for x, y in zip(ta, tb))


def test_input_seed_fixes_each_tasks_trial_inputs(bare_env, monkeypatch):
  fresh = _inputs(bare_env), _inputs(bare_env)
  assert not _same(*fresh)
  monkeypatch.setattr(bare_env, "config",
                      dataclasses.replace(bare_env.config, input_seed=5))
  seeded = _inputs(bare_env)
  assert _same(seeded, _inputs(bare_env))
  assert not _same(seeded[:1], seeded[1:])  # the trials still differ
  monkeypatch.setattr(bare_env, "config",
                      dataclasses.replace(bare_env.config, input_seed=6))
  assert not _same(seeded, _inputs(bare_env))
  keys = {str(jax.random.key_data(environment._seeded_key(5, t)))  # noqa: SLF001
          for t in (TASK, "level1/relu", "level1/abs")}
  assert len(keys) == 3


def test_fixed_inputs_holds_a_seed_inside_only(bare_env, monkeypatch):
  """Evaluations: inputs fixed by 7 inside, fresh again after (an error
  inside included), the rest of the config untouched; not the inputs a warm
  start built with seed 7 trained on."""
  fresh = bare_env.config
  with bare_env.fixed_inputs(7):
    inside = _inputs(bare_env)
    assert _same(inside, _inputs(bare_env))
    assert bare_env.config == dataclasses.replace(fresh, input_seed=7,
                                                  input_salt="eval:")
  assert bare_env.config is fresh
  assert not _same(_inputs(bare_env), _inputs(bare_env))
  with pytest.raises(RuntimeError):
    with bare_env.fixed_inputs(7):
      assert _same(inside, _inputs(bare_env))
      raise RuntimeError
  assert bare_env.config is fresh
  monkeypatch.setattr(bare_env, "config",  # a warm-start build's
                      dataclasses.replace(fresh, input_seed=7))
  assert not _same(inside[:1], _inputs(bare_env)[:1])


def test_input_seed_makes_wrong_output_feedback_repeat(bare_env, monkeypatch):
  wrong = [(TASK, CASES["wrong_output"][0])]
  fresh = [bare_env.evaluate(wrong)[0] for _ in range(2)]
  assert fresh[0].status is Status.WRONG_OUTPUT
  assert fresh[0].feedback != fresh[1].feedback
  monkeypatch.setattr(bare_env, "config",
                      dataclasses.replace(bare_env.config, input_seed=5))
  seeded = [bare_env.evaluate(wrong)[0] for _ in range(2)]
  assert seeded[0].status is Status.WRONG_OUTPUT
  assert seeded[0].feedback == seeded[1].feedback

"""Every verdict the environment can reach, through one real pool."""

import pytest

from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import timing as timing_lib
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

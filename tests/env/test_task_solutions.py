"""Every task's reference solution passes the environment (interpret mode + GPU lowering)."""

import pytest

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env.verdict import Status


@pytest.fixture(scope="module")
def verdicts():
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(deadline_s=120),
                                 check_lowering=True)
  ids = kernels_pallas.task_ids()
  answers = [candidate.fence(kernels_pallas.get_task(t).solution_candidate_source)
             for t in ids]
  with environment.KernelEnv(config) as env:
    return dict(zip(ids, env.evaluate(list(zip(ids, answers)))))


@pytest.mark.parametrize("task_id", kernels_pallas.task_ids())
def test_solution_is_ok(verdicts, task_id):
  verdict = verdicts[task_id]
  assert verdict.status is Status.OK, verdict.feedback

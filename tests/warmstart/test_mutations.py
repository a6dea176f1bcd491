import random

import pytest

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env.verdict import Status
from leap_jax.warmstart import mutations

SRC = """BLOCK_M, BLOCK_N = 64, 128
BLOCK = 256

def _k(x_ref, o_ref):
  acc = jnp.zeros((8,), jnp.float32)
  o_ref[...] = acc + jnp.sum(x_ref[...], axis=-1)

def solution(x):
  spec = pl.BlockSpec((BLOCK_M, 16), lambda i, j: (i, j))
  out = pl.BlockSpec((BLOCK,), lambda i: (i,))
"""


def test_each_mutation_hand_checked():
  rng = random.Random(0)
  assert "BLOCK = 128" in mutations.wrong_block_shape(SRC.replace("BLOCK_M, BLOCK_N = 64, 128\n", ""), rng)
  swapped = mutations.wrong_index_map(SRC, random.Random(0))
  assert "lambda i, j: (j, i)" in swapped or "lambda i: (0,)" in swapped
  assert "jnp.ones((8,)" in mutations.missing_init(SRC, rng)
  assert "axis=0" in mutations.wrong_axis(SRC, rng)
  assert "out_ref[...] = acc" in mutations.typo(SRC, rng)


def test_inapplicable_mutation_is_none():
  assert mutations.missing_init("x = 1\n", random.Random(0)) is None
  assert mutations.typo("x = 1\n", random.Random(0)) is None


def test_mutate_all_is_deterministic():
  source = kernels_pallas.get_task("level1/matmul").solution_candidate_source
  assert mutations.mutate_all(source, 3) == mutations.mutate_all(source, 3)


def test_mutants_of_real_solutions_fail_in_the_environment():
  # A halved block size can stay correct (the grid follows it); the warm
  # start keeps only mutants the environment rejects.
  task_ids = ["level1/row_sum", "level1/matmul"]
  requests = []
  for task_id in task_ids:
    source = kernels_pallas.get_task(task_id).solution_candidate_source
    for name, mutated in mutations.mutate_all(source, 0).items():
      if name != "wrong_block_shape":
        requests.append((task_id, candidate.fence(mutated)))
  assert len(requests) >= 5
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(num_workers=2, deadline_s=60))
  with environment.KernelEnv(config) as env:
    verdicts = env.evaluate(requests)
  statuses = [v.status for v in verdicts]
  assert Status.OK not in statuses, [(r[1][-200:], s) for r, s in zip(requests, statuses)]

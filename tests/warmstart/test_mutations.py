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


GENERATED = '''def _kernel(x_ref, y_ref, v_ref, o_ref):
  x = x_ref[...]
  y = y_ref[...]
  v = v_ref[...]
  h = x
  h = h * y
  h = jnp.tanh(h)
  h = h + v[None, :]
  o_ref[...] = h


def kernel(x, y, v):
  return pl.pallas_call(
      _kernel,
      out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),
      in_specs=[spec, spec, row],
  )(x, y, v)
'''


def _changed_lines(before, after):
  a, b = before.splitlines(), after.splitlines()
  return [ln for ln in a if ln not in b], [ln for ln in b if ln not in a]


def test_step_mutations_hand_checked():
  rng = random.Random(0)
  gone, new = _changed_lines(GENERATED, mutations.wrong_op(GENERATED, rng))
  assert gone == ["  h = jnp.tanh(h)"] and len(new) == 1  # the only unary step
  gone, new = _changed_lines(GENERATED, mutations.dropped_step(GENERATED, rng))
  assert gone[0] in ("  h = h * y", "  h = jnp.tanh(h)", "  h = h + v[None, :]")
  assert len(gone) == 1 and new == []
  swapped = mutations.swapped_steps(GENERATED, rng)
  assert sorted(swapped.splitlines()) == sorted(GENERATED.splitlines())
  assert swapped != GENERATED
  gone, _ = _changed_lines(GENERATED, mutations.missing_load(GENERATED, rng))
  assert gone in (["  y = y_ref[...]"], ["  v = v_ref[...]"])
  gone, new = _changed_lines(GENERATED,
                             mutations.wrong_operand(GENERATED, rng))
  assert len(gone) == len(new) == 1 and gone[0].startswith("  h = h ")
  assert "(d, n)" in mutations.wrong_out_shape(GENERATED, rng)
  fewer = mutations.missing_in_spec(GENERATED, rng)
  assert fewer.count("in_specs=[") == 1 and len(
      fewer.split("in_specs=[")[1].split("]")[0].split(",")) == 2
  # No place for the bug: None.
  assert mutations.missing_load("  x = x_ref[...]\n", rng) is None
  assert mutations.swapped_steps("  h = x\n  h = -h\n", rng) is None


def test_a_reused_worker_quotes_each_candidates_own_lines():
  # Two mutants judged by one recycled worker (as the warm start judges
  # them): the second's traceback must show its own source lines.
  from configs import leap
  from leap_jax.env import settings
  cfg = leap.get_config("smoke").env
  cfg.num_workers = 1
  task_id = kernels_pallas.resolve_tasks("gen:train:1")[0]
  source = kernels_pallas.get_task(task_id).solution_candidate_source
  first = source.replace("  o_ref[...] = h", "  o_ref[...] = h_first")
  second = source.replace("  o_ref[...] = h", "  o_ref[...] = h_second")
  with environment.KernelEnv(settings.env_config_from(
      cfg, has_gpu=False, jobs_per_worker=4)) as env:
    verdicts = env.evaluate([(task_id, candidate.fence(first)),
                             (task_id, candidate.fence(second))])
  assert "o_ref[...] = h_first" in verdicts[0].feedback
  assert "o_ref[...] = h_second" in verdicts[1].feedback, verdicts[1].feedback

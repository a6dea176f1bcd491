"""Expert code passes: kernels written outside this project, through the real env.

Every other `.py` file here is a candidate adapted from upstream JAX Pallas
GPU ops (jax/experimental/pallas/ops/gpu/, Apache-2.0), the Pallas docs or
common Triton idioms, with a header:

  # task: levelN/name               the task its `kernel(*inputs)` solves
  # expect: compute_outside_kernel  optional; `ok` when absent
  # Source: ...                     where it comes from and what was adapted

All of them go through one KernelEnv as production runs them (AST screen,
sandboxed worker, Triton lowering check, interpret mode on CPU), with one
trial instead of three: acceptance is the question here, and the other
trials only run the same traced program on other inputs.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import time

import pytest

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
from leap_jax.env.verdict import Status

EXPERT_DIR = pathlib.Path(__file__).parent


@dataclasses.dataclass(frozen=True)
class Expert:
  name: str
  source: str
  task_id: str
  expect: Status


def _load(path: pathlib.Path) -> Expert:
  source = path.read_text()
  task = re.search(r"^# task: (\S+)$", source, re.M)
  expect = re.search(r"^# expect: (\S+)$", source, re.M)
  assert task, f"{path.name}: no '# task:' header"
  return Expert(path.stem, source, task.group(1),
                Status(expect.group(1)) if expect else Status.OK)


EXPERTS = {e.name: e for e in map(_load, sorted(
    p for p in EXPERT_DIR.glob("*.py")
    if not p.name.startswith(("test_", "__"))))}


@pytest.fixture(scope="module")
def verdicts():
  config = environment.EnvConfig(
      trials=1, pool=pool_lib.PoolConfig(num_workers=2, deadline_s=120))
  requests = [(e.task_id, candidate.fence(e.source)) for e in EXPERTS.values()]
  start = time.monotonic()
  with environment.KernelEnv(config) as env:
    got = dict(zip(EXPERTS, env.evaluate(requests)))
  print(f"\n{len(requests)} expert kernels through one KernelEnv "
        f"(2 workers): {time.monotonic() - start:.1f} s wall")
  for name, verdict in got.items():
    print(f"  {verdict.status.value:24s} {verdict.task_id:36s} {name}")
  return got


def test_the_suite_is_broad():
  ok = [e for e in EXPERTS.values() if e.expect is Status.OK]
  tasks = {e.task_id for e in ok}
  assert len(ok) >= 30
  assert len(tasks) >= 15
  assert {kernels_pallas.get_task(t).level for t in tasks} == {1, 2, 3}
  assert any(e.expect is Status.COMPUTE_OUTSIDE_KERNEL
             for e in EXPERTS.values())


@pytest.mark.parametrize("name", sorted(EXPERTS))
def test_names_its_source(name):
  assert re.search(r"^# Source: \S", EXPERTS[name].source, re.M)


@pytest.mark.parametrize("name", sorted(EXPERTS))
def test_passes_the_screen(name):
  result = screen.screen_source(EXPERTS[name].source)
  assert result.status is None, result.detail


@pytest.mark.parametrize("name", sorted(EXPERTS))
def test_verdict(verdicts, name):
  verdict = verdicts[name]
  assert verdict.status is EXPERTS[name].expect, verdict.feedback

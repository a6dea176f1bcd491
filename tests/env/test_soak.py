"""Soak and faults: mixed and hostile candidates while workers are SIGKILLed.

The full 200-candidate soak is benchmarks/soak.py; here a smaller one with
the same invariants, asserted exactly, plus the pool's rule for a candidate
whose worker is killed on every attempt.
"""

import json
import os
import pathlib
import signal

from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import soak
from leap_jax.env import wire
from leap_jax.env import worker_process
from leap_jax.env.verdict import Status

ADV_DIR = pathlib.Path(__file__).parent / "adversarial"


def test_mixture_is_seeded_and_has_the_hostile_share(tmp_path):
  hostile = soak.load_hostile(ADV_DIR, str(tmp_path))
  cands = soak.mixed_candidates(40, hostile, 0.25, seed=3)
  assert sum(c.kind.startswith("hostile:") for c in cands) == 10
  assert cands == soak.mixed_candidates(40, hostile, 0.25, seed=3)
  assert {c.kind for c in cands} >= set(soak.KINDS)
  assert not any("SENTINEL_DIR" in c.answer for c in hostile)
  assert any(str(tmp_path) in c.answer for c in hostile)
  # Those past the static screen come first: they are the ones that reach
  # a worker (an infinite loop, a memory bomb, an output flood).
  reach = [c.kind for c in hostile if not soak._screened_out(c.answer)]
  assert [c.kind for c in hostile[:len(reach)]] == reach
  assert {"hostile:infinite_loop", "hostile:memory_bomb"} <= set(reach)
  assert soak.mixed_batch(3) == [(c.task_id, c.answer)
                                 for c in soak.mixed_candidates(3)]


def test_tag_keeps_the_code_and_names_the_candidate():
  c = soak.benign("correct", "level1/relu")
  source = candidate.extract_code(soak.tagged(c, 7).answer)
  assert source.startswith(candidate.extract_code(c.answer).rstrip())
  assert source.rstrip().endswith("# soak candidate 7")
  no_code = soak.benign("no_code", "level1/relu")
  assert soak.tagged(no_code, 1) == no_code


def test_soak_invariants_hold_under_random_kills():
  counts = soak.soak(24, 0.25, ADV_DIR, workers=2, deadline_s=15,
                     batch_size=12, kill_every_s=1.5, seed=0)
  print("\nsoak counts: " + json.dumps(counts))
  assert soak.problems(counts) == []
  assert counts["verdicts"] == counts["candidates"] == 24
  assert counts["missing"] == counts["duplicates"] == 0
  assert counts["misattributed"] == counts["unexpected"] == 0
  assert counts["harness_error"] == 0
  assert counts["correct_ok"] == counts["correct"] > 0
  assert counts["live_before"] == counts["live_after"] == counts["pool_size"] == 2
  assert counts["live_end"] == 2 and counts["after_soak"] == "ok"
  assert counts["sentinel_files"] == 0
  # Faults really happened, in both phases, and each cost exactly one retry.
  assert counts["kills_by_phase"].get("startup", 0) >= 1
  assert counts["kills_by_phase"].get("candidate", 0) >= 1
  assert counts["retried"] >= 1
  assert counts["harness_faults"] == counts["retried"] <= counts["kills"]


class _KilledWorker(worker_process.WorkerProcess):
  """SIGKILLs its own process after it confirmed its job, `kills` times."""
  kills = 0

  def receive(self, deadline_s, max_bytes):
    if max_bytes > wire.MAX_HEADER_BYTES and type(self).kills > 0:
      type(self).kills -= 1
      os.kill(self.process.pid, signal.SIGKILL)
      self.process.join()
    return super().receive(deadline_s, max_bytes)


def test_killed_mid_candidate_is_retried_and_crashed_if_killed_again(
    monkeypatch):
  monkeypatch.setattr(worker_process, "WorkerProcess", _KilledWorker)
  # (No warmer: its receive would take a kill meant for a candidate.)
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=1, deadline_s=15, share_warm_up=False))
  answer = soak.benign("correct", "level1/vector_add").answer
  with environment.KernelEnv(config) as env:
    _KilledWorker.kills = 1
    (retried,) = env.evaluate([("level1/vector_add", answer)])
    assert retried.status is Status.OK, retried.detail
    _KilledWorker.kills = 2
    (killed,) = env.evaluate([("level1/vector_add", answer)])
    # Never harness_error: a candidate that gets itself killed (the OOM
    # killer) must not pass for the environment's fault.
    assert killed.status is Status.CRASHED
    assert "killed" in killed.detail
    assert env.pool.harness_faults == 3
    assert env.pool.live_workers() == env.pool.size


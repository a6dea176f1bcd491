"""The pool's handle on a worker: phases of its life, scratch removal."""

import os
import stat

from leap_jax.env import worker_process


def test_phases_from_hand_made_times():
  life = worker_process.WorkerLife(
      requested=10.0, forked_at=10.01, entered=10.02, jailed=10.03,
      ready=10.20, taken=11.0, started=11.05, outcome=12.0, gone=12.1)
  got = {k: round(v, 6) for k, v in life.phases().items()}
  assert got == {"fork": 0.02, "jail": 0.01, "backend": 0.17, "idle": 0.8,
                 "wait": 0.0, "job": 0.95, "teardown": 0.1, "confine": 0.05}


def test_a_job_that_waited_for_start_up_shows_it_as_wait():
  life = worker_process.WorkerLife(requested=0.0, entered=0.1, jailed=0.1,
                                   ready=0.5, taken=0.2, started=0.6)
  phases = life.phases()
  assert phases["wait"] == 0.3 and phases["idle"] == 0.0
  assert abs(phases["confine"] - 0.1) < 1e-9
  assert "job" not in phases and "teardown" not in phases


def test_remove_tree_whatever_the_worker_did_to_the_modes(tmp_path):
  root = tmp_path / "w0"
  (root / "locked" / "deeper").mkdir(parents=True)
  (root / "locked" / "deeper" / "f").write_text("x")
  os.chmod(root / "locked" / "deeper", 0)
  os.chmod(root / "locked", stat.S_IRUSR)
  worker_process.remove_tree(str(root))
  assert not root.exists()
  worker_process.remove_tree(str(root))  # already gone: no error

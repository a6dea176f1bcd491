"""benchmarks/mutant_repair.py's command line (its measure is tested in
tests/warmstart/test_mutant_repair.py)."""

import subprocess
import sys

from tests.benchmarks import scripts


def _run(*args):
  return subprocess.run([sys.executable, scripts.path("mutant_repair"), *args],
                        capture_output=True, text=True, timeout=120)


def test_bad_flags_fail_with_a_message():
  out = _run("--num_samples=0")
  assert out.returncode != 0
  assert "--num_samples must be >= 1" in out.stderr
  out = _run("stray")
  assert out.returncode != 0 and "unexpected arguments" in out.stderr


def test_an_unknown_task_set_is_named(tmp_path):
  out = _run("--tasks=gen:nowhere", f"--config.sft.dir={tmp_path}")
  assert out.returncode != 0
  assert "gen:nowhere" in out.stderr

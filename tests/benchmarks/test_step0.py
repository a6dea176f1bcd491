"""benchmarks/step0.py's command line (what it measures is tested in
tests/warmstart/test_analysis.py and test_mutant_repair.py)."""

import subprocess
import sys

from tests.benchmarks import scripts


def _run(*args):
  return subprocess.run([sys.executable, scripts.path("step0"), *args],
                        capture_output=True, text=True, timeout=120)


def test_bad_flags_fail_with_a_message():
  out = _run("--num_samples=1")
  assert out.returncode != 0
  assert "--num_samples must be >= 2 (>= 1 with --planted)" in out.stderr
  out = _run("--planted", "--num_samples=0")
  assert out.returncode != 0 and "--num_samples must be" in out.stderr
  out = _run("stray")
  assert out.returncode != 0 and "unexpected arguments" in out.stderr


def test_an_unknown_task_set_is_named(tmp_path):
  out = _run("--planted", "--tasks=gen:nowhere", f"--config.sft.dir={tmp_path}")
  assert out.returncode != 0
  assert "gen:nowhere" in out.stderr

"""The check_kernel command line, end to end in a subprocess."""

import json
import subprocess
import sys

import kernels_pallas

SCRIPT = "launch/check_kernel.py"


def _run(*args, timeout=300):
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True,
                        text=True, timeout=timeout)


def test_list_prints_every_task_id():
  out = _run("--list")
  assert out.returncode == 0
  assert out.stdout.split() == kernels_pallas.task_ids()


def test_verdicts_are_json_lines_in_order(tmp_path):
  good = tmp_path / "good.md"
  good.write_text("My answer:\n```python\n"
                  + kernels_pallas.get_task("level1/relu").solution_candidate_source
                  + "```\n")
  bad = tmp_path / "bad.py"
  bad.write_text("import jax.numpy as jnp\n\ndef kernel(x):\n  return jnp.maximum(x, 0)\n")
  out = _run("--task=level1/relu", f"--candidate={good}", f"--candidate={bad}",
             "--timeout_s=60", "--config.env.num_workers=1")
  assert out.returncode == 0, out.stderr
  lines = [json.loads(line) for line in out.stdout.splitlines()]
  assert [v["status"] for v in lines] == ["ok", "no_kernel"]
  for v in lines:
    assert {"task", "status", "correct", "speedup", "feedback", "seconds"} <= set(v)
  assert lines[0]["correct"] is True and lines[1]["correct"] is False


def test_unknown_task_and_missing_file_exit_2(tmp_path):
  out = _run("--task=level9/nope", f"--candidate={tmp_path}/x.py")
  assert out.returncode == 2 and "unknown task" in out.stderr
  assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
  out = _run("--task=level1/relu", f"--candidate={tmp_path}/missing.py")
  assert out.returncode == 2 and "cannot read" in out.stderr

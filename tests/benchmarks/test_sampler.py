"""benchmarks/sampler.py at the smallest size, ours only: the JSON line
carries our tokens/s with and without the CPU decode kernels."""

import json
import os
import subprocess
import sys

from leap_jax.model import cpu_decode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_small_run_reports_both_decode_paths():
  out = subprocess.run(
      [sys.executable, "benchmarks/sampler.py", "--skip_transformers",
       "--num_samples=2", "--max_new_tokens=4", "--repeats=1"],
      cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["num_samples"] == 2 and result["max_new_tokens"] == 4
  assert result["ours_tokens_per_s"] > 0 and result["ratio"] is None
  assert result["ours_cpu_kernels"] == cpu_decode.available()
  if result["ours_cpu_kernels"]:
    assert result["ours_pack_seconds"] > 0
    assert result["ours_xla_dot_tokens_per_s"] > 0

"""benchmarks/env_throughput.py at the smallest size: candidates per second
and the pool overhead share in the JSON line."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_small_run_reports_rate_and_overhead():
  out = subprocess.run(
      [sys.executable, "benchmarks/env_throughput.py", "--batch=3",
       "--workers=1", "--modes=forkserver"],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
  result = json.loads(out.stdout.strip().splitlines()[-1])
  (row,) = result["rows"]
  assert result["batch"] == 3 and row["workers"] == 1
  assert row["candidates_per_s"] > 0 and 0 <= row["pool_overhead"] < 1
  assert 0 < row["candidate_seconds"] <= row["seconds"]
  assert sum(row["statuses"].values()) == 3

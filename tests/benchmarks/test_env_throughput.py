"""benchmarks/env_throughput.py at the smallest size: candidates per second,
the pool overhead (share and seconds per job) and the phases in the JSON line."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_small_run_reports_rate_and_overhead():
  out = subprocess.run(
      [sys.executable, "benchmarks/env_throughput.py", "--batch=3",
       "--workers=1", "--modes=zygote"],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
  result = json.loads(out.stdout.strip().splitlines()[-1])
  (row,) = result["rows"]
  assert result["batch"] == 3 and row["workers"] == 1
  assert row["candidates_per_s"] > 0 and 0 <= row["pool_overhead"] < 1
  assert 0 < row["candidate_seconds"] <= row["seconds"]
  assert sum(row["statuses"].values()) == 3
  assert row["worker_jobs"] >= 1 and row["overhead_s_per_job"] >= 0
  phases = row["phases_s"]
  assert set(phases) == {"fork", "jail", "backend", "wait", "confine", "job",
                         "teardown"}
  assert phases["job"] > 0 and all(s >= 0 for s in phases.values())

"""benchmarks/soak.py at the smallest size: the table, the invariants line
and the JSON line's counts (the soak itself: tests/env/test_soak.py)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_small_soak_prints_its_counts():
  out = subprocess.run(
      [sys.executable, "benchmarks/soak.py", "--num=4", "--hostile=0.25",
       "--kill_every_s=0.5", "--deadline_s=15"],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
  lines = out.stdout.strip().splitlines()
  assert lines[-2] == "invariants: all hold", out.stdout
  counts = json.loads(lines[-1])
  assert counts["candidates"] == counts["verdicts"] == 4
  assert counts["hostile"] == 1 and counts["problems"] == []
  assert {"missing", "duplicates", "harness_error", "harness_faults", "kills",
          "kills_by_phase", "retried", "retried_ended_as", "statuses",
          "live_before", "live_after", "after_soak"} <= set(counts)

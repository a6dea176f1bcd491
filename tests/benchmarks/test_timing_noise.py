"""benchmarks/timing_noise.py --quick: A/A, solution and slower rows (the
slower variant: a quarter of the first block size) against the calibrated
band."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_run_prints_rows_against_the_band():
  out = subprocess.run([sys.executable, "benchmarks/timing_noise.py", "--quick"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       check=True)
  assert "noise band +-" in out.stdout
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["band"] > 0 and result["interpret"]
  rows = {r["candidate"]: r for r in result["rows"]}
  assert set(rows) == {"A/A", "solution", "slower"}
  for row in rows.values():
    assert row["n"] == 2 and row["statuses"] == ["ok"]
    assert {"median", "min", "max", "spread", "iqr", "outside_band"} <= set(row)
    assert row["min"] <= row["median"] <= row["max"]
  assert rows["A/A"]["ci_width"] is None and rows["solution"]["ci_width"] > 0
  # Four times the grid steps: clearly slower in interpret mode.
  assert rows["slower"]["max"] < rows["solution"]["min"]

"""benchmarks/select_pool.py: the share rule by hand, then the script on
dumps written by rollout_dump."""

import os
import subprocess
import sys

from leap_jax import rollout_dump
from tests.benchmarks import scripts

ROOT = scripts.ROOT
SCRIPT = scripts.path("select_pool")

select_pool = scripts.load("select_pool")


def test_select_keeps_shares_in_range_inclusive():
  tally = {"a": (2, 8), "b": (6, 8), "c": (1, 8), "d": (7, 8), "e": (0, 0),
           "f": (4, 16)}
  assert select_pool.select(tally, 0.25, 0.75) == ["a", "b", "f"]
  assert select_pool.select(tally, 0.0, 0.125) == ["c"]


def test_count_keeps_those_nearest_one_half_ties_by_id():
  tally = {"a": (2, 8), "b": (6, 8), "c": (3, 8), "d": (4, 8), "e": (0, 8),
           "f": (5, 8)}
  # distances from 1/2: d 0, c and f 1/8, a and b 1/4, e (out of range)
  assert select_pool.select(tally, 0.25, 0.75, count=1) == ["d"]
  assert select_pool.select(tally, 0.25, 0.75, count=2) == ["c", "d"]
  assert select_pool.select(tally, 0.25, 0.75, count=4) == ["a", "c", "d", "f"]
  assert select_pool.select(tally, 0.0, 1.0, count=9) == ["a", "b", "c", "d",
                                                         "e", "f"]


def _row(task, turn, status):
  return {"step": 1, "task": task, "p": 0, "g": 0, "turn": turn,
          "status": status}


def test_script_reads_every_step(tmp_path):
  # t1: 1 of 2 ok over two steps; t2: 0 of 2 (its turn-2 ok is no help).
  rollout_dump.write(tmp_path, 1, [_row("gen/ew_chain/x/8x8", 1, "ok"),
                                   _row("gen/row_reduce/y/8x8", 1, "wrong_output"),
                                   _row("gen/row_reduce/y/8x8", 2, "ok")])
  rollout_dump.write(tmp_path, 2, [_row("gen/ew_chain/x/8x8", 1, "syntax_error"),
                                   _row("gen/row_reduce/y/8x8", 1, "wrong_output")])
  out = subprocess.run([sys.executable, SCRIPT, f"--workdir={tmp_path}"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == "gen/ew_chain/x/8x8"
  assert "1 of 2 tasks" in out.stderr and "gen/row_reduce 0 of 1" in out.stderr
  empty = subprocess.run([sys.executable, SCRIPT, f"--workdir={tmp_path}",
                          "--min_share=0.7", "--max_share=0.9"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert empty.returncode != 0 and "no task in that range" in empty.stderr
  # A second run's dump is tallied with the first: t2 is then 2 of 4.
  other = tmp_path / "other"
  rollout_dump.write(other, 1, [_row("gen/row_reduce/y/8x8", 1, "ok"),
                                _row("gen/row_reduce/y/8x8", 1, "ok"),
                                _row("gen/ew_chain/x/8x8", 1, "ok")])
  both = subprocess.run([sys.executable, SCRIPT,
                         f"--workdir={tmp_path},{other}", "--count=1"],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert both.returncode == 0, both.stderr
  assert both.stdout.strip() == "gen/row_reduce/y/8x8"  # 2/4 against 2/3
  assert "of 2 runs" in both.stderr and "the 1 nearest" in both.stderr
  none = subprocess.run([sys.executable, SCRIPT,
                         f"--workdir={tmp_path / 'nothing'}"],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert none.returncode != 0 and "no rollout dumps" in none.stderr


def test_loads_beside_a_script_that_kept_its_flags():
  # Another module may hold a --workdir flag for the session.
  from absl import flags  # pylint: disable=g-import-not-at-top
  fv_had = "workdir" in flags.FLAGS
  if not fv_had:
    flags.DEFINE_string("workdir", "kept", "held by another module")
  kept = flags.FLAGS["workdir"]
  try:
    assert "workdir" in scripts.defined_flags(open(SCRIPT).read())
    assert scripts.load("select_pool").select({"a": (1, 2)}, 0, 1) == ["a"]
    assert flags.FLAGS["workdir"] is kept
  finally:
    if not fv_had:
      delattr(flags.FLAGS, "workdir")

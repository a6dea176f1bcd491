"""benchmarks/leap_vs_full.py: the wall-clock-to-accuracy arithmetic on
hand-computed metrics rows, and one --quick run (3 modes x 2 smoke steps)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "leap_vs_full.py")


def _load():
  # Not a package; its absl flags (--quick, ...) are dropped again after
  # loading so other benchmark scripts loaded in this session can define theirs.
  before = set(flags.FLAGS)
  spec = importlib.util.spec_from_file_location("leap_vs_full_under_test", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  for name in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, name)
  return module


lvf = _load()


def test_acc_at_falls_back_to_the_last_logged_turn():
  assert lvf.acc_at({"acc@1": 0.25, "acc@2": 0.5}, 2) == 0.5
  assert lvf.acc_at({"acc@1": 0.25}, 3) == 0.25  # single-turn GRPO


def test_step_seconds_prefers_the_measured_step():
  assert lvf.step_seconds({"seconds_step": 7.0, "seconds_env": 2.0}) == 7.0
  assert lvf.step_seconds({"seconds_rollout": 1.0, "seconds_env": 2.0,
                           "seconds_update": 0.5}) == 3.5


def test_running_mean_starts_at_the_first_full_window():
  smooth = lvf.running_mean([0.0, 0.3, 0.6, 0.3], 3)
  assert smooth[:2] == [None, None]
  assert smooth[2:] == pytest.approx([0.3, 0.4])


def test_wall_to_reach_is_the_first_step_at_or_above_target():
  wall, acc = [10.0, 30.0, 60.0, 100.0], [None, 0.15, 0.3, 0.4]
  assert lvf.wall_to_reach(wall, acc, 0.3) == 60.0
  assert lvf.wall_to_reach(wall, acc, 0.15) == 30.0
  assert lvf.wall_to_reach(wall, acc, 0.5) is None
  assert lvf.wall_to_reach(wall, acc, None) is None


def _rows(acc1, acc2, seconds, env_calls):
  rows = []
  for i, a1 in enumerate(acc1):
    row = {"step": i + 1, "acc@1": a1, "seconds_step": seconds,
           "seconds_rollout": 1.0, "seconds_env": 2.0, "seconds_update": 3.0,
           "env_calls": env_calls, "policy_calls": 2}
    if acc2 is not None:
      row["acc@2"] = acc2[i]
    rows.append(row)
  return rows


def test_build_result_by_hand():
  # Window 2 (- = no full window yet). leap: 10 s/step, Acc@2 .2 .4 .4 .6
  # -> smoothed - .3 .4 .5 (walls 10 20 30 40). full: 20 s/step, Acc@2
  # .4 .4 .6 .6 -> - .4 .5 .6 (walls 20 40 60 80). Target min(.5, .6) = .5:
  # leap at 40 s, full at 60 s, ratio 1.5, gap .1. Acc@1: leap .1 .2 .3 .3
  # -> - .15 .25 .3, full .2 .2 .2 .4 -> - .2 .2 .3; target .3: leap 40 s,
  # full 80 s, ratio 2. GRPO logs acc@1 only (.3 .5 .5 .5 at 5 s/step):
  # Acc@2 = Acc@1, smoothed - .4 .5 .5: .5 at 15 s, .3 at 10 s (not 5 s:
  # step 1 alone is no window).
  result = lvf.build_result({
      "leap": _rows([.1, .2, .3, .3], [.2, .4, .4, .6], 10.0, 10),
      "multiturn_full": _rows([.2, .2, .2, .4], [.4, .4, .6, .6], 20.0, 16),
      "grpo_single_turn": _rows([.3, .5, .5, .5], None, 5.0, 8),
  }, window=2)
  assert result["turns"] == 2
  assert result["target"] == pytest.approx(0.5)
  assert result["wallclock_ratio"] == pytest.approx(1.5)
  assert result["acc_gap"] == pytest.approx(0.1)
  assert result["acc1"]["target"] == pytest.approx(0.3)
  assert result["acc1"]["wallclock_ratio"] == pytest.approx(2.0)
  assert result["acc1"]["acc_gap"] == pytest.approx(0.0)
  walls = result["acc1"]["wall_to_target_s"]
  assert walls == {"leap": 40.0, "multiturn_full": 80.0, "grpo_single_turn": 10.0}
  rows = {r["mode"]: r for r in result["rows"]}
  assert rows["leap"]["wall to Acc@2 target (s)"] == 40.0
  assert rows["multiturn_full"]["wall to Acc@2 target (s)"] == 60.0
  assert rows["grpo_single_turn"]["wall to Acc@2 target (s)"] == 15.0
  assert rows["grpo_single_turn"]["acc@2"] == 0.5  # filled from acc@1
  assert rows["multiturn_full"]["env calls/step"] == 16
  assert rows["leap"]["s/step step"] == 10.0
  assert rows["leap"]["s/step env"] == 2.0
  assert result["modes"]["leap"]["env_calls"] == 40
  assert result["modes"]["multiturn_full"]["curve"]["wall_s"] == [20, 40, 60, 80]


def test_no_ratio_without_both_modes():
  result = lvf.build_result({"leap": _rows([.5], [.5], 1.0, 4)}, window=3)
  assert result["wallclock_ratio"] is None and result["acc_gap"] is None
  assert result["window"] == 1  # a 1-step run is smoothed over its length
  assert result["rows"][0]["acc@2"] == 0.5
  assert "never" in lvf.text_table(result["rows"])


def test_fresh_workdir_removes_runs_only(tmp_path):
  run = tmp_path / "run"
  (run / "checkpoints").mkdir(parents=True)
  lvf.fresh_workdir(str(run), reuse=True)
  assert run.exists()
  lvf.fresh_workdir(str(run), reuse=False)
  assert not run.exists()
  other = tmp_path / "other"
  other.mkdir()
  (other / "notes.txt").write_text("mine")
  with pytest.raises(SystemExit):
    lvf.fresh_workdir(str(other), reuse=False)
  assert (other / "notes.txt").exists()


def test_quick_end_to_end(tmp_path):
  out = subprocess.run(
      [sys.executable, SCRIPT, "--quick", f"--out={tmp_path / 'out'}",
       f"--sft_dir={tmp_path / 'warmstart'}"],
      capture_output=True, text=True, timeout=900, cwd=ROOT)
  assert out.returncode == 0, out.stderr[-3000:]
  lines = out.stdout.strip().splitlines()
  result = json.loads(lines[-1])
  assert "wall to Acc@2 target (s)" in lines[1]  # the table header
  assert isinstance(result["wallclock_ratio"], float)
  assert result["wallclock_ratio"] > 0
  assert isinstance(result["acc_gap"], float)
  assert [r["mode"] for r in result["rows"]] == list(lvf.MODES)
  for mode, m in result["modes"].items():
    assert m["steps"] == 2, mode
    assert m["env_calls"] > 0 and m["seconds_per_step"]["env"] > 0
    assert len(m["curve"]["wall_s"]) == 2
  with open(tmp_path / "out" / "leap_vs_full.json") as f:
    assert json.load(f) == result

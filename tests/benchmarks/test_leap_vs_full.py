"""benchmarks/leap_vs_full.py: one --quick run end to end (its statistics
are tested by hand in tests/test_comparison.py)."""

import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks import scripts

ROOT = scripts.ROOT
SCRIPT = scripts.path("leap_vs_full")

lvf = scripts.load("leap_vs_full")


def test_fresh_workdir_removes_runs_only(tmp_path):
  run = tmp_path / "run"
  (run / "checkpoints").mkdir(parents=True)
  lvf.fresh_workdir(str(run))
  assert not run.exists()
  other = tmp_path / "other"
  other.mkdir()
  (other / "notes.txt").write_text("mine")
  with pytest.raises(SystemExit):
    lvf.fresh_workdir(str(other))
  assert (other / "notes.txt").exists()


def test_warm_start_dir_per_seed_or_shared():
  assert lvf.warm_start_dir("/ws", 0, shared=False) == "/ws"
  assert lvf.warm_start_dir("/ws", 2, shared=False) == "/ws_seed2"
  assert lvf.warm_start_dir("/ws", 2, shared=True) == "/ws"


def test_shared_warm_start_is_in_the_command_and_the_key(monkeypatch):
  for name, value in (("_MODES", ["leap"]), ("_EXTRA", [])):
    monkeypatch.setattr(lvf, name, type("Flag", (), {"value": value}))
  own = lvf.Runner("configs/leap.py:bench", "/out", "gen:eval:48", 4)
  shared = lvf.Runner("configs/leap.py:bench", "/out", "gen:eval:48", 4,
                      shared_warm_start=True)
  assert "--config.sft.seed=-1" in own.common(2, "/ws_seed2")
  assert "--config.sft.seed=0" in shared.common(2, "/ws")
  # The key names the warm start's resolved seed, not the directory alone:
  # seed 0 is the same run either way, seed 2 is not.
  assert own.key(0, "/ws", [8]) == shared.key(0, "/ws", [8])
  assert own.key(2, "/ws", [8]) != shared.key(2, "/ws", [8])
  assert (own.key(2, "/ws", [8])["warm_start_seed"],
          shared.key(2, "/ws", [8])["warm_start_seed"]) == (2, 0)


def test_a_changed_default_is_a_new_key(monkeypatch):
  for name, value in (("_MODES", ["leap"]), ("_EXTRA", [])):
    monkeypatch.setattr(lvf, name, type("Flag", (), {"value": value}))
  config = lvf.leap_config.get_config("bench")
  digest = lvf.defaults_digest(config)
  assert digest == lvf.defaults_digest(lvf.leap_config.get_config("bench"))
  config.rl.negative_weight = 1.0 - config.rl.negative_weight
  changed = lvf.defaults_digest(config)
  assert changed != digest
  keys = [lvf.Runner("configs/leap.py:bench", "/out", "gen:eval:48", 4,
                     defaults=d).key(0, "/ws", [8]) for d in (digest, changed)]
  assert keys[0]["defaults"] == digest and keys[0] != keys[1]


def test_training_segments_leave_evaluation_to_the_benchmark(monkeypatch):
  for name, value in (("_MODES", ["leap"]), ("_EXTRA", [])):
    monkeypatch.setattr(lvf, name, type("Flag", (), {"value": value}))
  runner = lvf.Runner("configs/leap.py", "/out", "gen:eval:48", 4)
  args = runner.train_args(1, "/ws", "/out/seed1/leap", "leap", 8)
  for arg in ("--config=configs/leap.py", "--config.seed=1",
              "--workdir=/out/seed1/leap", "--config.rl.mode=leap",
              "--config.num_steps=8", "--config.checkpoint_every=8",
              # the default config evaluates before step 1 and at the last
              "--config.eval_at_start=False", "--config.eval_every=0"):
    assert arg in args, arg


def test_each_variant_has_its_own_default_out():
  assert lvf.default_out("bench") == "leap_vs_full"
  assert lvf.default_out("smoke") == "leap_vs_full_quick"
  assert lvf.default_out("") == "leap_vs_full_default"
  assert lvf.default_out("level1") == "leap_vs_full_level1"


@pytest.mark.parametrize("args, message", [
    (["--variant=benhc"], "--variant: unknown variant 'benhc' of "
     "configs/leap.py (did you mean 'bench'?)"),
    (["--quick", "--variant="], "--quick runs configs/leap.py:smoke"),
])
def test_a_bad_variant_is_refused_before_any_run(tmp_path, args, message):
  out = subprocess.run([sys.executable, SCRIPT, f"--out={tmp_path}", *args],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert out.returncode == 2, out.stderr[-2000:]
  assert f"leap_vs_full: error: {message}" in out.stderr
  assert not list(tmp_path.iterdir())


def test_describe_split_names_a_list_by_its_size():
  assert lvf.describe_split("gen:eval:48") == "gen:eval:48"
  assert lvf.describe_split("a/x,b/y") == "a/x,b/y"
  assert lvf.describe_split("a/x,b/y,c/z") == "3 listed (a/x, ...)"


def test_saved_seed_round_trips_under_its_key_only(tmp_path, capsys):
  key = {"seed": 1, "config": "configs/leap.py:smoke", "eval_steps": [2, 4]}
  result = {"accs": {"leap": {0: 0.5, 4: 0.625}},
            "totals": {"leap": {"wall_s": {0: 0.0, 4: 12.5}}},
            "turns": 2, "activated": [0.25, 0.5]}
  lvf.save_seed(str(tmp_path), key, result, {"train": 3.0})
  assert lvf.load_seed(str(tmp_path), key) == (result, {"train": 3.0})
  # Other settings (another --extra, more steps) measure something else.
  assert lvf.load_seed(str(tmp_path), {**key, "eval_steps": [2]}) is None
  assert "other settings (eval_steps)" in capsys.readouterr().err
  assert lvf.load_seed(str(tmp_path / "none"), key) is None
  assert not list(tmp_path.glob("*.tmp"))


def _quick(tmp_path):
  return subprocess.run(
      [sys.executable, SCRIPT, "--quick", f"--out={tmp_path / 'out'}",
       f"--sft_dir={tmp_path / 'warmstart'}", "--resamples=200"],
      capture_output=True, text=True, timeout=1800, cwd=ROOT)


def test_quick_end_to_end(tmp_path):
  out = _quick(tmp_path)
  assert out.returncode == 0, out.stderr[-3000:]
  lines = out.stdout.strip().splitlines()
  result = json.loads(lines[-1])
  for key in ("seeds", "reached", "ratio_seeds", "wallclock_ratio_mean",
              "wallclock_ratio_ci_low",
              "env_calls_ratio_mean", "acc_gap_mean", "activated_groups_mean",
              "null_p"):
    assert key in result, key
  assert result["seeds"] == 2 and result["eval_steps"] == [2]
  assert isinstance(result["acc_gap_mean"], float)
  assert 0 <= result["activated_groups_mean"] <= 1
  assert [r["run"] for r in result["rows"]][:3] == [
      "frozen (step 0)", "leap", "multiturn_full"]
  for accs, totals in zip(result["accs"], result["totals"]):
    assert set(accs) == {"leap", "multiturn_full"}
    for mode in accs:
      assert set(accs[mode]) == {"0", "2"}  # JSON keys
      assert totals[mode]["env_calls"]["2"] > 0
  # Every evaluation of a seed judged on that seed's fixed trial inputs.
  for seed in (0, 1):
    with open(tmp_path / "out" / f"seed{seed}" / "leap.log.eval") as f:
      evals = [e for e in map(json.loads, filter(
          lambda line: line.startswith("{"), f)) if "acc@1" in e]
    assert evals and {e["input_seed"] for e in evals} == {seed}
  # Each seed had its warm start; seed 1's sits beside seed 0's.
  assert (tmp_path / "warmstart_seed1" / "warmstart.json").exists()
  with open(tmp_path / "out" / "leap_vs_full.json") as f:
    assert json.load(f) == result
  # A rerun reads both finished seeds back: nothing trains again, and the
  # statistics come out the same.
  again = _quick(tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert again.stderr.count("reusing") == 2
  assert "launch/train.py" not in again.stderr and "step 1/" not in again.stderr
  rerun = json.loads(again.stdout.strip().splitlines()[-1])
  for key in ("seconds",):
    rerun.pop(key), result.pop(key)
  assert rerun == result

"""benchmarks/results.py: the page rendered from a small hand-made set of
saved results (no benchmark runs), and a run of fake benchmark scripts:
quick arguments passed, failures named, a failed rerun keeps the saved result."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "results.py")


def _record(name, result, error=None, quick=False):
  return {"name": name, "command": f"python benchmarks/{name}.py",
          "quick": quick, "date": "2025-01-02T03:04:05",
          "machine": "x86_64, 2 CPU cores", "seconds": 12.5,
          "result": result, "error": error}


def _mode(walls, acc1, acc2):
  return {"steps": len(walls), "curve": {"step": [1, 2], "wall_s": walls,
                                         "acc@1": acc1, "acc@2": acc2},
          "smooth": {"acc@1": [None, *acc1[1:]], "acc@2": [None, *acc2[1:]]}}


LEAP_VS_FULL = {
    "benchmark": "leap_vs_full", "turns": 2, "window": 3, "target": 0.5,
    "wallclock_ratio": 1.5, "acc_gap": 0.125,
    "acc1": {"target": 0.25, "wallclock_ratio": 2.0, "acc_gap": 0.0},
    "config": "configs/leap.py", "steps": 2, "seed": 0, "warmstart_s": 3.0,
    "process_s": {"leap": 30.0, "multiturn_full": 50.0},
    "rows": [{"mode": "leap", "steps": 2, "acc@2": 0.5,
              "wall to Acc@2 target (s)": 20.0},
             {"mode": "multiturn_full", "steps": 2, "acc@2": 0.625,
              "wall to Acc@2 target (s)": 30.0},
             {"mode": "grpo_single_turn", "steps": 2, "acc@2": 0.25,
              "wall to Acc@2 target (s)": None}],
    "modes": {"leap": _mode([10.0, 20.0], [0.25, 0.25], [0.5, 0.5]),
              "multiturn_full": _mode([15.0, 30.0], [0.25, 0.25], [0.5, 0.625]),
              "grpo_single_turn": _mode([5.0, 10.0], [0.25, 0.25], [0.25, 0.25])},
}
ENV_THROUGHPUT = {"batch": 64, "rows": [
    {"mode": "forkserver", "workers": 2, "candidates_per_s": 1.58,
     "statuses": {"ok": 40, "forbidden": 8}},
    {"mode": "spawn", "workers": 2, "candidates_per_s": 0.86,
     "statuses": {"ok": 40, "forbidden": 8}}]}


def _save(docs, record):
  os.makedirs(docs / "results", exist_ok=True)
  (docs / "results" / f"{record['name']}.json").write_text(json.dumps(record))


def _results(*args):
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True,
                        text=True, timeout=300, cwd=ROOT)


def test_page_from_saved_results(tmp_path):
  docs = tmp_path / "docs"
  _save(docs, _record("leap_vs_full", LEAP_VS_FULL, quick=True))
  _save(docs, _record("env_throughput", ENV_THROUGHPUT))
  _save(docs, _record("soak", None, error="benchmarks/soak.py is not there"))
  out = _results("--from_saved", f"--docs={docs}")
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.strip().splitlines()[-1] == str(docs / "results.md")
  page = (docs / "results.md").read_text()
  # leap_vs_full: headline figures, the per-mode table and its plot.
  assert "| wallclock_ratio (full / leap, to that target) | 1.5 |" in page
  assert "| acc_gap (full - leap, final Acc@2) | 0.125 |" in page
  assert "| mode | steps | acc@2 | wall to Acc@2 target (s) |" in page
  assert "| multiturn_full | 2 | 0.625 | 30 |" in page
  assert "| grpo_single_turn | 2 | 0.25 | - |" in page
  assert "(--quick: small sizes)" in page
  assert "![Acc vs wall clock](results/leap_vs_full.png)" in page
  png = (docs / "results" / "leap_vs_full.png").read_bytes()
  assert png.startswith(b"\x89PNG")
  # A benchmark without its own renderer: scalars, then its rows.
  assert "| batch | 64 |" in page
  assert "| mode | workers | candidates_per_s | statuses |" in page
  assert "| forkserver | 2 | 1.58 | ok=40, forbidden=8 |" in page
  # Missing or failed ones are named.
  assert "**benchmarks/soak.py is not there**" in page
  assert "## Timing noise\n\nNo saved result" in page
  # Re-rendering is deterministic: same saved JSON, same page.
  assert _results("--from_saved", f"--docs={docs}").returncode == 0
  assert (docs / "results.md").read_text() == page


def test_unknown_benchmark_is_a_flag_error(tmp_path):
  out = _results("--only=nope", f"--docs={tmp_path}")
  assert out.returncode == 1
  assert "--only takes names from leap_vs_full, env_throughput" in out.stderr
  assert not (tmp_path / "results.md").exists()


def _fake_script(directory, name, body):
  (directory / f"{name}.py").write_text(
      "import json, sys\nprint('a table line')\n" + body + "\n")


def test_runs_scripts_and_keeps_a_failed_ones_previous_result(tmp_path):
  scripts, docs = tmp_path / "fake", tmp_path / "docs"
  scripts.mkdir()
  _fake_script(scripts, "leap_vs_full", f"print(json.dumps({LEAP_VS_FULL!r}))")
  _fake_script(scripts, "env_throughput",
               "print(json.dumps({'argv': sys.argv[1:], 'batch': 16}))")
  _fake_script(scripts, "sampler", "sys.exit(3)")
  _fake_script(scripts, "soak",
               "print(json.dumps({'invariants_hold': False}))\nsys.exit(1)")
  _fake_script(scripts, "timing_noise", "print('not json')")
  _save(docs, _record("sampler", {"ours_tokens_per_s": 99.5}))  # an earlier run
  out = _results("--quick", f"--scripts={scripts}", f"--docs={docs}")
  assert out.returncode == 0, out.stderr[-3000:]
  assert "a table line" in out.stderr  # the scripts' own output, for the console
  saved = json.loads((docs / "results" / "env_throughput.json").read_text())
  assert saved["result"]["argv"] == ["--batch=16", "--workers=1"]  # quick sizes
  assert saved["quick"] and saved["error"] is None
  sampler = json.loads((docs / "results" / "sampler.json").read_text())
  assert sampler["result"] == {"ours_tokens_per_s": 99.5}
  assert "failed: " in sampler["error"] and "exited 3" in sampler["error"]
  page = (docs / "results.md").read_text()
  assert "| ours_tokens_per_s | 99.5 |" in page
  assert "the result below is from 2025-01-02T03:04:05" in page
  assert "soak.py exited 1**" in page  # and its own JSON says why:
  assert "| invariants_hold | False |" in page
  assert "timing_noise.py: Expecting value" in page
  assert "| argv | " not in page  # lists are left out of the scalar table
  assert "| wallclock_ratio (full / leap, to that target) | 1.5 |" in page


def test_a_missing_script_is_named(tmp_path):
  out = _results("--only=timing_noise", f"--scripts={tmp_path}",
                 f"--docs={tmp_path / 'docs'}")
  assert out.returncode == 0, out.stderr[-3000:]
  assert "timing_noise: " in out.stdout and "is not there" in out.stdout
  page = (tmp_path / "docs" / "results.md").read_text()
  assert "timing_noise.py is not there**" in page

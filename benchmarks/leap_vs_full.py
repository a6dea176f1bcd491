"""LEAP vs full multi-turn RL (and single-turn GRPO): wall clock to equal accuracy.

From one warm start (one `config.sft.dir`, made first by launch/sft.py) and
one seed, each mode trains the same number of steps in its own
`launch/train.py` subprocess (the command users run; a fresh process each),
one after the other on this machine. Same seed and data position: step i
draws the same tasks in every mode. The benchmark then reads each
DIR/metrics.jsonl and reports per mode the mean seconds per step (rollout
sampling, environment, update, and the whole step), environment calls,
Acc@1..T, and the wall clock to reach a target accuracy.

Accuracy is smoothed: a trailing mean over --window steps (defined from
step --window on), because one step's Acc@t over P*G trajectories is
noisy. "Final" is the smoothed value at the last step. Target = the lower of leap's and
multiturn_full's final smoothed Acc@T; wall clock to it = cumulative
`seconds_step` (the trainer's measured wall per step, compile included) at
the first step whose smoothed Acc@T reaches it. The same is reported for
Acc@1, which every mode measures the same way: training-rollout Acc@T is
not (LEAP prunes turns that multiturn_full samples, and single-turn GRPO
has only turn 1, so its Acc@t is its Acc@1). --eval_samples evaluates every
final checkpoint with one unpruned protocol (launch/evaluate.py) for that.

  python benchmarks/leap_vs_full.py [--steps=8] [--window=3] [--out=DIR]
      [--modes=leap,multiturn_full,grpo_single_turn] [--eval_samples=0]
      [--reuse] [--extra=--config.env.num_workers=2 --extra=...]
  python benchmarks/leap_vs_full.py --quick      # smoke config, ~2 min

Last stdout line: one JSON object (wallclock_ratio = full / leap to the
target, acc_gap = full's final Acc@T - leap's, per-mode rows and curves),
also saved to OUT/leap_vs_full.json.
"""

import itertools
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from leap_jax import run_log  # noqa: E402
from leap_jax.cli import fail  # noqa: E402

MODES = ("leap", "multiturn_full", "grpo_single_turn")
PHASES = ("rollout", "env", "update", "step")
DEFAULT_STEPS, QUICK_STEPS = 8, 2

_QUICK = flags.DEFINE_bool(
    "quick", False, f"configs/leap.py:smoke and {QUICK_STEPS} steps per mode.")
_STEPS = flags.DEFINE_integer(
    "steps", 0, f"Steps per mode (0: {DEFAULT_STEPS}, or {QUICK_STEPS} "
    "with --quick).")
_MODES = flags.DEFINE_list("modes", list(MODES), "Modes to train.")
flags.register_validator("modes", lambda modes: set(modes) <= set(MODES),
                         f"--modes takes modes from {', '.join(MODES)}")
_SEED = flags.DEFINE_integer("seed", 0, "config.seed for every mode.")
_WINDOW = flags.DEFINE_integer("window", 3,
                               "Trailing mean over this many steps.")
_OUT = flags.DEFINE_string(
    "out", "", "Workdirs, logs and leap_vs_full.json (default: "
    "runs/leap_vs_full, or runs/leap_vs_full_quick with --quick).")
_SFT_DIR = flags.DEFINE_string(
    "sft_dir", "", "The shared warm start (default: the config's sft.dir).")
_EXTRA = flags.DEFINE_multi_string(
    "extra", [], "One more --config.FIELD=VALUE for sft.py and train.py, the "
    "same for every mode (repeatable).")
_REUSE = flags.DEFINE_bool(
    "reuse", False, "Keep existing mode workdirs (train.py resumes them) "
    "instead of starting each mode afresh.")
_EVAL_SAMPLES = flags.DEFINE_integer(
    "eval_samples", 0, "If > 0: evaluate each final checkpoint on the "
    "training tasks, this many trajectories per task, T turns, no pruning.")


# -- pure functions over metrics rows ----------------------------------------


def acc_at(row: dict, t: int) -> float:
  """Acc@t of one step. A mode that logs fewer turns (single-turn GRPO logs
  only acc@1) has solved by turn t what it solved by its last turn."""
  for s in range(t, 0, -1):
    value = row.get(f"acc@{s}")
    if isinstance(value, (int, float)):
      return float(value)
  return float("nan")


def step_seconds(row: dict) -> float:
  """The step's measured wall seconds, else the sum of its phases."""
  if isinstance(row.get("seconds_step"), (int, float)):
    return float(row["seconds_step"])
  return sum(float(row.get(f"seconds_{p}") or 0.0) for p in PHASES[:3])


def running_mean(values: list[float], window: int) -> list[float | None]:
  """Trailing mean over `window` values; None before the first full window
  (a lucky first step alone must not count as reaching a target)."""
  return [None if i + 1 < window else sum(values[i + 1 - window:i + 1]) / window
          for i in range(len(values))]


def wall_to_reach(wall_s: list[float], acc: list[float],
                  target: float | None) -> float | None:
  """Cumulative wall seconds at the first step with acc >= target (None
  entries never do); None if no step reaches it."""
  if target is None:
    return None
  for wall, value in zip(wall_s, acc):
    # The tolerance lets the lower mode's own final value count as reached.
    if value is not None and value >= target - 1e-9:
      return wall
  return None


def turns_of(rows_by_mode: dict[str, list[dict]]) -> int:
  """T: the highest acc@t any mode logged."""
  return max((int(k[4:]) for rows in rows_by_mode.values() for r in rows
              for k in r if k.startswith("acc@")), default=1)


def _mean(values: list[float]) -> float:
  return sum(values) / len(values) if values else float("nan")


def summarize(rows: list[dict], turns: int, window: int) -> dict:
  """One mode: mean seconds per phase, env calls, final smoothed Acc@t, and
  the per-step curves (raw and smoothed) against cumulative wall seconds."""
  curve = {"step": [r["step"] for r in rows],
           "wall_s": list(itertools.accumulate(step_seconds(r) for r in rows))}
  smooth = {}
  for t in range(1, turns + 1):
    curve[f"acc@{t}"] = [acc_at(r, t) for r in rows]
    smooth[f"acc@{t}"] = running_mean(curve[f"acc@{t}"], window)
  seconds = {p: _mean([step_seconds(r) if p == "step"
                       else float(r.get(f"seconds_{p}") or 0.0) for r in rows])
             for p in PHASES}
  env_calls = sum(float(r.get("env_calls") or 0.0) for r in rows)
  return {"steps": len(rows), "seconds_per_step": seconds,
          "env_calls": env_calls, "env_calls_per_step": env_calls / max(1, len(rows)),
          "policy_calls": sum(float(r.get("policy_calls") or 0.0) for r in rows),
          "final": {k: v[-1] if v else None for k, v in smooth.items()},
          "wall_s": curve["wall_s"][-1] if rows else 0.0,
          "curve": curve, "smooth": smooth}


def compare(modes: dict[str, dict], key: str) -> dict:
  """Target = the lower of leap's and multiturn_full's final `key`; each
  mode's wall to it; wallclock_ratio = full / leap; acc_gap = full - leap."""
  leap, full = modes.get("leap"), modes.get("multiturn_full")
  if not (leap and full and leap["steps"] and full["steps"]):
    return {"target": None, "wall_to_target_s": {}, "wallclock_ratio": None,
            "acc_gap": None}
  target = min(leap["final"][key], full["final"][key])
  walls = {m: wall_to_reach(s["curve"]["wall_s"], s["smooth"][key], target)
           for m, s in modes.items()}
  ratio = (walls["multiturn_full"] / walls["leap"]
           if walls["leap"] and walls["multiturn_full"] is not None else None)
  return {"target": target, "wall_to_target_s": walls, "wallclock_ratio": ratio,
          "acc_gap": full["final"][key] - leap["final"][key]}


def _round(value, digits: int):
  return None if value is None else round(value, digits)


def table_rows(modes: dict[str, dict], turns: int, by_acc_t: dict,
               by_acc_1: dict) -> list[dict]:
  """One flat row per mode (what the table and the results page show)."""
  rows = []
  for mode, s in modes.items():
    row = {"mode": mode, "steps": s["steps"]}
    row.update({f"s/step {p}": _round(s["seconds_per_step"][p], 2)
                for p in PHASES})
    row["env calls/step"] = _round(s["env_calls_per_step"], 1)
    row.update({k: _round(v, 3) for k, v in s["final"].items()})
    row[f"wall to Acc@{turns} target (s)"] = _round(
        by_acc_t["wall_to_target_s"].get(mode), 1)
    row["wall to Acc@1 target (s)"] = _round(
        by_acc_1["wall_to_target_s"].get(mode), 1)
    rows.append(row)
  return rows


def build_result(rows_by_mode: dict[str, list[dict]], window: int) -> dict:
  """The benchmark's JSON: headline figures, table rows, per-mode details.
  Runs shorter than `window` steps are smoothed over their length."""
  turns = turns_of(rows_by_mode)
  window = max(1, min([window, *(len(r) for r in rows_by_mode.values() if r)]))
  modes = {m: summarize(rows, turns, window) for m, rows in rows_by_mode.items()}
  by_acc_t = compare(modes, f"acc@{turns}")
  by_acc_1 = compare(modes, "acc@1")
  return {"benchmark": "leap_vs_full", "turns": turns, "window": window,
          "wallclock_ratio": by_acc_t["wallclock_ratio"],
          "acc_gap": by_acc_t["acc_gap"], "target": by_acc_t["target"],
          "acc1": by_acc_1,
          "rows": table_rows(modes, turns, by_acc_t, by_acc_1),
          "modes": modes}


def text_table(rows: list[dict]) -> str:
  """Fixed-width columns; None prints as 'never'."""
  if not rows:
    return "(no rows)"
  headers = list(rows[0])
  cells = [[("never" if r.get(h) is None else str(r.get(h))) for h in headers]
           for r in rows]
  widths = [max(len(h), *(len(c[i]) for c in cells))
            for i, h in enumerate(headers)]
  lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
  lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
  return "\n".join(lines)


# -- running the modes -----------------------------------------------------------


def run_logged(cmd: list[str], log_path: str) -> float:
  """Runs cmd from the repository root, its output streamed to stderr and
  saved to log_path; returns wall seconds; exits with a message on failure."""
  start = time.monotonic()
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  with open(log_path, "w") as log, subprocess.Popen(
      cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True) as proc:
    for line in proc.stdout:
      log.write(line)
      sys.stderr.write(line)
  if proc.returncode:
    fail("leap_vs_full", f"{os.path.basename(cmd[1])} exited "
         f"{proc.returncode}; see {log_path}")
  return time.monotonic() - start


def fresh_workdir(path: str, reuse: bool) -> None:
  """Removes a previous run of this benchmark there (unless reusing); never
  a directory that is not a training run."""
  if reuse or not os.path.exists(path):
    return
  if not {"metrics.jsonl", "checkpoints"} & set(os.listdir(path)):
    fail("leap_vs_full", f"{path} exists and is not a training run; "
         "choose another --out")
  shutil.rmtree(path)


def last_json(log_path: str) -> dict:
  with open(log_path) as f:
    return json.loads(f.read().strip().splitlines()[-1])


def evaluate(workdir: str, samples: int, log_path: str) -> dict:
  """Acc@t of the final checkpoint on the training tasks, no pruning."""
  run_logged([sys.executable, os.path.join("launch", "evaluate.py"),
              f"--workdir={workdir}", "--split=train", f"--num_samples={samples}",
              "--notiming", "--json"], log_path)
  result = last_json(log_path)
  return {k: v for k, v in result.items()
          if k.startswith("acc@") or k == "turns_per_pass"}


def run_modes(config: str, steps: int, out: str) -> tuple[dict, dict]:
  """Makes (or checks) the shared warm start, trains every mode; returns the
  metrics rows per mode and the run facts (process seconds, ...)."""
  common = [f"--config={config}", f"--config.seed={_SEED.value}", *_EXTRA.value]
  if _SFT_DIR.value:
    common.append(f"--config.sft.dir={os.path.abspath(_SFT_DIR.value)}")
  facts = {"config": config, "steps": steps, "seed": _SEED.value, "out": out,
           "extra": _EXTRA.value, "process_s": {}}
  sft_log = os.path.join(out, "sft.log")
  facts["warmstart_s"] = run_logged(
      [sys.executable, os.path.join("launch", "sft.py"), *common], sft_log)
  facts["sft_dir"] = last_json(sft_log)["dir"]
  rows_by_mode = {}
  for mode in _MODES.value:
    workdir = os.path.join(out, mode)
    fresh_workdir(workdir, _REUSE.value)
    os.makedirs(workdir, exist_ok=True)
    facts["process_s"][mode] = run_logged(
        [sys.executable, os.path.join("launch", "train.py"), *common,
         f"--workdir={workdir}", f"--config.rl.mode={mode}",
         f"--config.num_steps={steps}"], os.path.join(out, f"{mode}.log"))
    rows_by_mode[mode] = run_log.read_metrics(workdir)[:steps]
  return rows_by_mode, facts


def _fmt(value) -> str:
  return "none" if value is None else f"{value:.3f}"


def main(argv):
  if len(argv) > 1:
    fail("leap_vs_full", f"unexpected arguments: {argv[1:]}")
  quick = _QUICK.value
  config = "configs/leap.py:smoke" if quick else "configs/leap.py"
  steps = _STEPS.value or (QUICK_STEPS if quick else DEFAULT_STEPS)
  out = os.path.abspath(_OUT.value or os.path.join(
      ROOT, "runs", "leap_vs_full_quick" if quick else "leap_vs_full"))
  os.makedirs(out, exist_ok=True)
  rows_by_mode, facts = run_modes(config, steps, out)
  result = build_result(rows_by_mode, _WINDOW.value)
  result.update(facts)
  if _EVAL_SAMPLES.value > 0:
    result["eval"] = {m: evaluate(os.path.join(out, m), _EVAL_SAMPLES.value,
                                  os.path.join(out, f"{m}_eval.log"))
                      for m in _MODES.value}
    ev, key = result["eval"], f"acc@{result['turns']}"
    if {"leap", "multiturn_full"} <= set(ev):
      result["eval_acc_gap"] = ev["multiturn_full"][key] - ev["leap"][key]
  result = run_log.json_safe(result)
  print(f"{config}, {steps} steps per mode, seed {_SEED.value}, "
        f"{os.cpu_count()} CPU cores; accuracy: trailing mean over "
        f"{result['window']} steps; target Acc@{result['turns']} = "
        f"{_fmt(result['target'])}, wall clock full / leap = "
        f"{_fmt(result['wallclock_ratio'])}, acc gap = {_fmt(result['acc_gap'])}")
  print(text_table(result["rows"]))
  with open(os.path.join(out, "leap_vs_full.json"), "w") as f:
    json.dump(result, f, indent=1)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)

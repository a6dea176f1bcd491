"""LEAP vs full multi-turn RL: wall clock to a fixed held-out accuracy, over seeds.

On configs/leap.py:bench (the testbed: generated specs, held-out
gen:eval:48; WORKSPACE.md "The testbed"), or the variant --variant names
(--variant= : the default config, the README's run). Per seed s (0..--seeds-1): a warm
start of its own (config.seed = s; with --shared_warm_start seed 0's for
all), then every mode (leap, multiturn_full,
optionally grpo_single_turn) trains from it in `launch/train.py`
subprocesses, one after the other. Training stops at each evaluation step
(--eval_every) and `launch/evaluate.py` (another process: its time is never
in the training clock) measures the checkpoint with the unpruned multi-turn
protocol on --eval_split (default: the config's held-out eval_tasks), the
same tasks and sampling seed for every mode. The frozen control is step 0:
the warm start every mode starts from, which an lr = 0 run keeps at every
step.

Target: --target if >= 0, else the frozen control's Acc@T plus
--target_margin; fixed before any mode is compared, never taken from the
modes' own results. Per seed and mode, at the first evaluation step whose
Acc@T reaches the target: the training wall clock (each process's first
step holds the compilations, so it counts at the median of the run's other
steps), environment calls and sampled tokens (deterministic axes). Ratios
are full / leap. A mode that never reaches the target is censored at its
last step (its ratio is then a bound, flagged). Means over seeds come with
a paired bootstrap interval (seeds resampled), and the permutation null of
the mean wall-clock ratio: at every seed and evaluation step the two modes'
accuracies are swapped at random while each keeps its own clock; null_p is
the share of swaps whose ratio is at least the observed one.

Each finished seed is saved (OUT/seed<s>/seed.json, with what it was
measured with: the flags and a digest of the variant's resolved defaults,
so a changed default is a new measurement); a rerun with the same settings
reads it back instead of training again, so a crash or ^C in a later seed
loses only that seed.

  python benchmarks/leap_vs_full.py [--variant=bench] [--seeds=3] [--steps=16] [--eval_every=4]
      [--eval_split=gen:eval:48] [--eval_samples=4] [--target=-1] [--target_margin=0.05]
      [--modes=leap,multiturn_full] [--out=DIR] [--shared_warm_start]
      [--extra=--config.X=Y ...]
  python benchmarks/leap_vs_full.py --quick   # smoke config, 2 seeds x 2 steps

Last stdout line: one JSON object (seeds, reached (seeds in which each
mode reached the target), ratio_seeds (those the means are over: a seed
where only leap misses it has no ratio), wallclock_ratio_mean,
wallclock_ratio_ci_low, wallclock_ratio_per_seed (each seed's ratio or its
bound, as printed), env_calls_ratio_mean, acc_gap_mean,
activated_groups_mean, null_p, and the per-seed details), also saved to
OUT/leap_vs_full.json.
"""

import hashlib
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
import ml_collections  # noqa: E402

from configs import leap as leap_config  # noqa: E402
from leap_jax import run_log  # noqa: E402
from leap_jax.cli import fail  # noqa: E402
from leap_jax.warmstart import store  # noqa: E402
from leap_jax.comparison import (COMPARED, cumulative, eval_steps,  # noqa: E402
                                 summarize, text_table)

MODES = ("leap", "multiturn_full", "grpo_single_turn")

_QUICK = flags.DEFINE_bool(
    "quick", False, "configs/leap.py:smoke, 2 seeds x 2 steps, evaluated on "
    "the smoke's training tasks (its held-out tasks are out of its reach).")
_VARIANT = flags.DEFINE_string(
    "variant", "bench", "configs/leap.py's variant (empty: the default "
    "config); not with --quick, which is :smoke.")
_SEEDS = flags.DEFINE_integer("seeds", 0, "Seeds 0..N-1 (0: 3, or 2 with "
                              "--quick).")
_STEPS = flags.DEFINE_integer("steps", 0, "Steps per run (0: 16, or 2 with "
                              "--quick).")
_EVAL_EVERY = flags.DEFINE_integer(
    "eval_every", 0, "Evaluate every this many steps and at the last (0: 4, "
    "or 2 with --quick).")
_EVAL_SPLIT = flags.DEFINE_string(
    "eval_split", "", "Evaluation tasks, as launch/evaluate.py's --split "
    "reads them (eval, train, all or a task set such as gen:eval:48; "
    "default: the config's held-out eval_tasks, train with --quick).")
_EVAL_SAMPLES = flags.DEFINE_integer("eval_samples", 0, "Trajectories per "
                                     "task (0: 4, or 2 with --quick).")
_TARGET = flags.DEFINE_float("target", -1.0, "Absolute Acc@T target (< 0: "
                             "the frozen control's plus --target_margin).")
_MARGIN = flags.DEFINE_float("target_margin", 0.05, "Added to the frozen "
                             "control's Acc@T for the target.")
_MODES = flags.DEFINE_list("modes", list(COMPARED), "Modes to train (leap "
                           "and multiturn_full are compared).")
flags.register_validator(
    "modes", lambda m: set(COMPARED) <= set(m) <= set(MODES),
    f"--modes must hold {' and '.join(COMPARED)}, and only modes of {MODES}")
_OUT = flags.DEFINE_string("out", "", "Workdirs, logs and leap_vs_full.json "
                           "(default: runs/leap_vs_full[_quick]).")
_SFT_DIR = flags.DEFINE_string(
    "sft_dir", "", "Seed 0's warm start (default: the config's sft.dir); "
    "seed s > 0 uses it with the suffix _seed<s>.")
_SHARED_WARM_START = flags.DEFINE_bool(
    "shared_warm_start", False, "Every seed starts from seed 0's warm start "
    "(one build instead of one per seed: on :bench 45 min here each); seeds "
    "then differ in RL sampling, task order and evaluation only, so the "
    "interval is over RL's spread given one warm start.")
_EXTRA = flags.DEFINE_multi_string(
    "extra", [], "One more --config.FIELD=VALUE for every sft.py and train.py "
    "(repeatable).")
_RESAMPLES = flags.DEFINE_integer("resamples", 2000, "Bootstrap resamples "
                                  "and permutations.")


def _r(value, digits=3):
  return None if value is None else round(float(value), digits)


def seed_rows(seed: int, accs: dict, totals: dict, reach: dict,
              turns: int) -> list[dict]:
  """Table rows of one seed: the frozen control, then every mode."""
  frozen = accs["leap"][0]
  rows = [{"seed": seed, "run": "frozen (step 0)", f"acc@{turns}": _r(frozen)}]
  for mode in accs:
    at, wall = reach.get(mode), totals[mode]["wall_s"]
    last = max(wall)  # the last step
    rows.append({
        "seed": seed, "run": mode,
        f"acc@{turns}": " ".join(f"{s}:{accs[mode][s]:.3f}"
                                 for s in sorted(accs[mode]) if s),
        "target step": None if at is None else
        (f">{at['step']}" if at["censored"] else at["step"]),
        "wall (s)": None if at is None else _r(at["wall_s"], 1),
        "env calls": None if at is None else int(at["env_calls"]),
        "tokens": None if at is None else int(at["tokens"]),
        "s/step": _r(wall[last] / max(1, last), 2)})
  return rows


# -- running ----------------------------------------------------------------


def run_logged(cmd: list[str], log_path: str) -> float:
  """Runs cmd from the repository root, output to stderr and log_path;
  returns wall seconds; exits with a message on failure."""
  start = time.monotonic()
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  with open(log_path, "a") as log, subprocess.Popen(
      cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True) as proc:
    for line in proc.stdout:
      log.write(line)
      sys.stderr.write(line)
  if proc.returncode:
    fail("leap_vs_full", f"{os.path.basename(cmd[1])} exited "
         f"{proc.returncode}; see {log_path}")
  return time.monotonic() - start


def fresh_workdir(path: str) -> None:
  """Removes a previous run of this benchmark there; never a directory that
  is not a training run."""
  if not os.path.exists(path):
    return
  if not {"metrics.jsonl", "checkpoints"} & set(os.listdir(path)):
    fail("leap_vs_full", f"{path} exists and is not a training run; "
         "choose another --out")
  shutil.rmtree(path)


SEED_FILE = "seed.json"


def _int_keys(tree):
  """JSON turned the step keys of accs and totals into strings."""
  if isinstance(tree, dict):
    return {(int(k) if isinstance(k, str) and k.isdigit() else k):
            _int_keys(v) for k, v in tree.items()}
  return tree


def save_seed(base: str, key: dict, result: dict, seconds: dict) -> None:
  """One finished seed, written atomically: a later crash or ^C keeps it."""
  path = os.path.join(base, SEED_FILE)
  with open(path + ".tmp", "w") as f:
    json.dump({"key": key, "result": result, "seconds": seconds}, f)
  os.replace(path + ".tmp", path)


def load_seed(base: str, key: dict) -> tuple[dict, dict] | None:
  """(result, seconds) of a seed finished under the same key, else None
  (saying which settings differ)."""
  path = os.path.join(base, SEED_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    saved = json.load(f)
  if saved.get("key") != key:
    old = saved.get("key") or {}
    differ = sorted(k for k in {*old, *key} if old.get(k) != key.get(k))
    print(f"{path} was measured with other settings ({', '.join(differ)}); "
          "measuring again", file=sys.stderr)
    return None
  result = saved["result"]
  return ({**result, "accs": _int_keys(result["accs"]),
           "totals": _int_keys(result["totals"])}, saved["seconds"])


def last_json(log_path: str) -> dict:
  with open(log_path) as f:
    return json.loads(f.read().strip().splitlines()[-1])


def defaults_digest(config: ml_collections.ConfigDict) -> str:
  """A short hash of a variant's resolved config: what a saved seed's flags
  leave to the code's defaults."""
  text = config.to_json_best_effort(sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_split(split: str) -> str:
  """A split as printed: a list of task ids by its size and first id."""
  ids = split.split(",")
  return split if len(ids) < 3 else f"{len(ids)} listed ({ids[0]}, ...)"


def warm_start_dir(base: str, seed: int, shared: bool) -> str:
  """Seed `seed`'s warm start: base itself for seed 0 or when shared."""
  return base if shared or not seed else f"{base}_seed{seed}"


def default_out(variant: str) -> str:
  """runs/<this> holds a variant's runs when --out is not given."""
  return {"bench": "leap_vs_full", "smoke": "leap_vs_full_quick"}.get(
      variant, f"leap_vs_full_{variant or 'default'}")


def _python(script: str, *args: str) -> list[str]:
  return [sys.executable, os.path.join(*script.split("/")), *args]


class Runner:
  """Runs one seed's warm start, training segments and evaluations."""

  def __init__(self, config: str, out: str, split: str, samples: int,
               shared_warm_start: bool = False, defaults: str = ""):
    self.config, self.out, self.split, self.samples = config, out, split, samples
    self.defaults = defaults  # defaults_digest of the variant
    # A shared warm start is seed 0's, whatever seed the RL runs take.
    self.sft_seed = 0 if shared_warm_start else -1
    self.seconds = {"sft": 0.0, "train": 0.0, "eval": 0.0}

  def common(self, seed: int, sft_dir: str) -> list[str]:
    return [f"--config={self.config}", f"--config.seed={seed}",
            f"--config.sft.dir={sft_dir}", f"--config.sft.seed={self.sft_seed}",
            *_EXTRA.value]

  def key(self, seed: int, sft_dir: str, steps: list[int]) -> dict:
    """What a seed is measured with: a saved result is reused only under
    the same key."""
    return {"seed": seed, "config": self.config, "defaults": self.defaults,
            "sft_dir": sft_dir,
            "warm_start_seed": store.warm_start_seed(ml_collections.ConfigDict(
                {"seed": seed, "sft": {"seed": self.sft_seed}})),
            "eval_steps": steps, "split": self.split, "samples": self.samples,
            # Every evaluation of the seed judges on the same trial inputs,
            # so one checkpoint's Acc@2+ repeats (stop 37; before, turn 2
            # read feedback on fresh inputs: the frozen control moved by up
            # to 4 of 128 trajectories between runs).
            "eval_input_seed": seed,
            "modes": list(_MODES.value), "extra": list(_EXTRA.value)}

  def train_args(self, seed: int, sft_dir: str, workdir: str, mode: str,
                 step: int) -> list[str]:
    """launch/train.py's arguments for the segment that ends at `step`."""
    return [*self.common(seed, sft_dir), f"--workdir={workdir}",
            f"--config.rl.mode={mode}", f"--config.num_steps={step}",
            f"--config.checkpoint_every={step}",
            # The benchmark evaluates in processes of its own, off the
            # training clock; a variant's own evaluations would double them.
            "--config.eval_at_start=False", "--config.eval_every=0"]

  def evaluate(self, workdir: str, step: int, log: str, seed: int) -> dict:
    self.seconds["eval"] += run_logged(_python(
        "launch/evaluate.py", f"--workdir={workdir}", f"--step={step}",
        f"--split={self.split}", f"--num_samples={self.samples}",
        f"--input_seed={seed}", "--notiming", "--json"), log)
    return last_json(log)

  def seed(self, seed: int, sft_dir: str, steps: list[int]) -> dict:
    """accs (mode -> step -> Acc@T), totals, turns, activated groups; a
    seed finished before under the same settings is read back, not rerun."""
    base = os.path.join(self.out, f"seed{seed}")
    os.makedirs(base, exist_ok=True)
    key = self.key(seed, sft_dir, steps)
    saved = load_seed(base, key)
    if saved is not None:
      print(f"seed {seed}: reusing {os.path.join(base, SEED_FILE)} (delete it "
            "to rerun)", file=sys.stderr)
      for name, value in saved[1].items():
        self.seconds[name] += value
      return saved[0]
    before = dict(self.seconds)
    result = self._measure(seed, sft_dir, steps, base)
    save_seed(base, key, result,
              {k: self.seconds[k] - before[k] for k in self.seconds})
    return result

  def _measure(self, seed: int, sft_dir: str, steps: list[int],
               base: str) -> dict:
    common = self.common(seed, sft_dir)
    self.seconds["sft"] += run_logged(_python("launch/sft.py", *common),
                                      os.path.join(base, "sft.log"))
    accs, totals, activated, turns, frozen = {}, {}, [], None, None
    for mode in _MODES.value:
      workdir = os.path.join(base, mode)
      fresh_workdir(workdir)
      log = os.path.join(base, f"{mode}.log")
      accs[mode] = {}
      for step in steps:
        self.seconds["train"] += run_logged(_python(
            "launch/train.py", *self.train_args(seed, sft_dir, workdir, mode,
                                                step)), log)
        if turns is None:
          # The frozen control: step 0 is the warm start every mode starts
          # from, evaluated with the same tasks and seed; it alone sets the
          # target.
          result = self.evaluate(workdir, 0, log + ".eval", seed)
          turns, frozen = result["turns"], result[f"acc@{result['turns']}"]
        accs[mode].setdefault(0, frozen)
        accs[mode][step] = self.evaluate(workdir, step, log + ".eval",
                                         seed)[f"acc@{turns}"]
      rows = run_log.read_metrics(workdir)[:steps[-1]]
      first = {1, *(s + 1 for s in steps[:-1])}
      totals[mode] = cumulative(rows, first)
      if mode == "leap":
        activated += [float(r["activated_groups"]) for r in rows]
    return {"accs": accs, "totals": totals, "turns": turns,
            "activated": activated}


def main(argv):
  if len(argv) > 1:
    fail("leap_vs_full", f"unexpected arguments: {argv[1:]}")
  quick = _QUICK.value
  if quick and _VARIANT.value != "bench":
    fail("leap_vs_full", "--quick runs configs/leap.py:smoke; drop --variant")
  variant = "smoke" if quick else _VARIANT.value
  try:
    defaults = leap_config.get_config(variant)
  except ValueError as e:
    fail("leap_vs_full", f"--variant: {e}")
  config = f"configs/leap.py{':' + variant if variant else ''}"
  num_seeds = _SEEDS.value or (2 if quick else 3)
  steps = _STEPS.value or (2 if quick else 16)  # issues 19/20: >= 16
  every = _EVAL_EVERY.value or (2 if quick else 4)
  split = _EVAL_SPLIT.value or ("train" if quick else
                                defaults.eval_tasks or "eval")
  samples = _EVAL_SAMPLES.value or (2 if quick else 4)
  if samples < 2 or steps < 1 or every < 1:
    fail("leap_vs_full", "--eval_samples must be >= 2, --steps and "
         "--eval_every >= 1")
  out = os.path.abspath(_OUT.value or os.path.join(
      ROOT, "runs", default_out(variant)))
  os.makedirs(out, exist_ok=True)
  sft_base = os.path.abspath(_SFT_DIR.value) if _SFT_DIR.value else ""
  runner = Runner(config, out, split, samples, _SHARED_WARM_START.value,
                  defaults_digest(defaults))
  start = time.monotonic()
  seeds, results, targets = list(range(num_seeds)), [], []
  for seed in seeds:
    sft_dir = warm_start_dir(sft_base or os.path.join(ROOT, defaults.sft.dir),
                             seed, _SHARED_WARM_START.value)
    results.append(runner.seed(seed, sft_dir, eval_steps(steps, every)))
    frozen = results[-1]["accs"]["leap"][0]
    targets.append(_TARGET.value if _TARGET.value >= 0
                   else frozen + _MARGIN.value)
  turns = results[0]["turns"]
  summary = summarize(seeds, [r["accs"] for r in results],
                      [r["totals"] for r in results], targets,
                      [a for r in results for a in r["activated"]],
                      _RESAMPLES.value)
  rows = [row for seed, r, s in zip(seeds, results, summary["per_seed"])
          for row in seed_rows(seed, r["accs"], r["totals"], s["reach"], turns)]
  result = run_log.json_safe({
      "benchmark": "leap_vs_full", **summary, "config": config,
      "steps": steps, "eval_steps": eval_steps(steps, every),
      "eval_split": split, "eval_samples": samples, "turns": turns,
      "extra": _EXTRA.value, "rows": rows,
      "accs": [r["accs"] for r in results],
      "totals": [r["totals"] for r in results],
      "process_s": runner.seconds, "seconds": time.monotonic() - start})
  fmt = lambda v: "none" if v is None else f"{v:.3f}"
  print(f"{config}, {num_seeds} seeds x {steps} steps, Acc@{turns} on "
        f"{describe_split(split)} tasks at steps {result['eval_steps']} "
        f"({samples} samples, unpruned); {os.cpu_count()} CPU cores")
  print(text_table(rows))
  reached = result["reached"]
  print(f"target reached by leap in {reached['leap']} of {num_seeds} seeds, "
        f"by multiturn_full in {reached['multiturn_full']}; ratios over the "
        f"{result['ratio_seeds']} seed(s) where leap reached it; per seed "
        f"{', '.join(r or 'none' for r in result['wallclock_ratio_per_seed'])}"
        " ('<=': leap censored, '>=': full censored)")
  print(f"wall clock full / leap to the target: mean "
        f"{fmt(result['wallclock_ratio_mean'])} (95% paired bootstrap "
        f"{fmt(result['wallclock_ratio_ci_low'])}.."
        f"{fmt(result['wallclock_ratio_ci_high'])}); permutation null: median "
        f"{fmt(result['null_median'])}, p = {fmt(result['null_p'])}; env calls "
        f"{fmt(result['env_calls_ratio_mean'])}; acc gap (full - leap, final) "
        f"{fmt(result['acc_gap_mean'])}")
  with open(os.path.join(out, "leap_vs_full.json"), "w") as f:
    json.dump(result, f, indent=1)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)

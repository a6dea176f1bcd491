"""A policy at step 0 on held-out tasks: what LEAP has to work with.

  python benchmarks/step0.py [--config=configs/leap.py]
      [--tasks=gen:eval:48] [--num_samples=8] [--turns=3] [--planted] [--json]

Samples num_samples trajectories of up to `turns` turns per task, unpruned,
and prints Acc@1..T, the groups by DCP type (all correct, easy, activated,
hopeless) with failed and repaired trajectories, the repair rate by group
type, the same rollout with every feedback replaced by a bare "wrong" (the
feedback ablation), the resampling yardstick (T-1 fresh samples in
activated groups) and how many turn-2 answers copy turn 1.

--planted measures repair where the fix is known instead: every failing
one-line mutant of each task's solution as a repair prompt, with its real
feedback and with bare "wrong", beside fresh turn-1 samples
(leap_jax/warmstart/mutant_repair.py; num_samples defaults to 2 there).

The warm start is made first when the config's sft.dir has none. With
--json the last stdout line is one JSON object.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from leap_jax.cli import absolute_paths, fail, quiet_logging  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "leap.py"),
    "Run config (model, sft, env, rl blocks): its warm start is step 0.")
_TASKS = flags.DEFINE_string(
    "tasks", "gen:eval:48", "Task set (kernels_pallas/task_sets.py).")
_SAMPLES = flags.DEFINE_integer(
    "num_samples", -1, "Samples per task (G; -1: 8), per planted bug with "
    "--planted (-1: 2).")
_TURNS = flags.DEFINE_integer("turns", 3, "Turns per trajectory (T).")
_PLANTED = flags.DEFINE_bool(
    "planted", False, "Repair of planted one-line bugs instead of rollouts.")
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object last.")


def main(argv):
  if len(argv) > 1:
    fail("step0", f"unexpected arguments: {argv[1:]}")
  samples = (_SAMPLES.value if _SAMPLES.value != -1
             else 2 if _PLANTED.value else 8)
  if samples < (1 if _PLANTED.value else 2) or _TURNS.value < 2:
    fail("step0", "--num_samples must be >= 2 (>= 1 with --planted) and "
         "--turns >= 2")
  quiet_logging()
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  from leap_jax import run_log, trainer  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart import analysis, mutant_repair  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart.store import WarmStartError  # pylint: disable=g-import-not-at-top

  start = time.monotonic()
  try:
    config = _CONFIG.value
    absolute_paths(config)
    tasks = kernels_pallas.resolve_tasks(_TASKS.value)
    policy = trainer.load_policy(config)
    cfg = trainer.rl_config(config).replace(max_turns=_TURNS.value)
    with trainer.make_env(config) as env:
      if _PLANTED.value:
        result = mutant_repair.measure(policy, policy.params, env, tasks, cfg,
                                       samples, seed=config.seed)
      else:
        result = analysis.analyse(policy, policy.params, env, tasks, cfg,
                                  samples, seed=config.seed)
  except (WarmStartError, ValueError) as e:
    fail("step0", str(e))
  result["seconds"] = time.monotonic() - start
  result["task_set"] = _TASKS.value
  report = mutant_repair if _PLANTED.value else analysis
  print(report.format_report(result))
  print(f"({result['seconds']:.0f} s; {policy.description})")
  if _JSON.value:
    result.pop("ok_PGT", None), result.pop("bare_ok_PGT", None)
    print(json.dumps(run_log.json_safe(result)))


if __name__ == "__main__":
  app.run(main)

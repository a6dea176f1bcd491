"""Does repair read the feedback? Planted one-line bugs on held-out tasks.

  python benchmarks/mutant_repair.py [--config=configs/leap.py:testbed]
      [--tasks=gen:eval:48] [--num_samples=2] [--json]

Every applicable mutation (leap_jax/warmstart/mutations.py) of each task's
solution that the environment fails becomes a repair prompt: the mutant and
the environment's feedback, then again with a bare "wrong". Prints the
repaired share of num_samples samples each way, per mutation, beside fresh
turn-1 samples of the same tasks (leap_jax/warmstart/mutant_repair.py).
The warm start is made first when the config's sft.dir has none. With
--json the last stdout line is one JSON object.
"""

import functools
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
                           "leap.py") + ":testbed",
    "Run config (model, sft, env, rl blocks): its warm start is measured.")
_TASKS = flags.DEFINE_string(
    "tasks", "gen:eval:48", "Task set (kernels_pallas/task_sets.py).")
_SAMPLES = flags.DEFINE_integer("num_samples", 2,
                                "Samples per repair prompt and per task.")
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object last.")


def main(argv):
  if len(argv) > 1:
    fail("mutant_repair", f"unexpected arguments: {argv[1:]}")
  if _SAMPLES.value < 1:
    fail("mutant_repair", "--num_samples must be >= 1")
  quiet_logging()
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  from leap_jax import policy as policy_lib, run_log, task_stream, trainer  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart import mutant_repair  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart.store import WarmStartError  # pylint: disable=g-import-not-at-top

  start = time.monotonic()
  try:
    config = _CONFIG.value
    absolute_paths(config)
    tasks = kernels_pallas.resolve_tasks(_TASKS.value)
    train_tasks = task_stream.training_tasks(config.train_tasks)
    policy = policy_lib.load(config, train_tasks,
                             functools.partial(trainer.make_env, config))
    with trainer.make_env(config) as env:
      result = mutant_repair.measure(
          policy, policy.params, env, tasks, trainer.rl_config(config),
          _SAMPLES.value, seed=config.seed)
  except (WarmStartError, ValueError) as e:
    fail("mutant_repair", str(e))
  result["seconds"] = time.monotonic() - start
  result["task_set"] = _TASKS.value
  print(mutant_repair.format_report(result))
  print(f"({result['seconds']:.0f} s; {policy.description})")
  if _JSON.value:
    print(json.dumps(run_log.json_safe(result)))


if __name__ == "__main__":
  app.run(main)

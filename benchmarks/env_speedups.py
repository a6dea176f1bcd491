"""A/A noise band and each task's solution speedup over its jnp reference.

On a CPU host the solutions run in Pallas interpret mode, so these numbers
measure the interpreter, not a GPU kernel. Last stdout line: one JSON object.

  python benchmarks/env_speedups.py [--rounds=10] [--tasks=level1/matmul,...]
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

import kernels_pallas  # noqa: E402
from leap_jax.env import candidate  # noqa: E402
from leap_jax.env import environment  # noqa: E402
from leap_jax.env import settings  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs", "leap.py"))
_TASKS = flags.DEFINE_list("tasks", [], "Task ids (default: all).")


def main(argv):
  del argv
  cfg = _CONFIG.value.env
  task_ids = _TASKS.value or kernels_pallas.task_ids()
  with environment.KernelEnv(settings.env_config_from(cfg)) as env:
    start = time.perf_counter()
    band = env.calibrate()
    calibration_s = time.perf_counter() - start
    answers = [(t, candidate.fence(kernels_pallas.get_task(t).solution_candidate_source))
               for t in task_ids]
    verdicts = env.evaluate(answers, timing_on=True)
    where = "Pallas interpret mode on CPU" if env.interpret else "GPU"
    print(f"A/A noise band: +-{100 * band:.1f}% (q95 |log ratio| of "
          f"{len(env.calibration_ratios)} A/A runs, {calibration_s:.0f} s); "
          f"timings in {where}")
    width = max(len(t) for t in task_ids) + 2
    print(f"{'task':<{width}}{'status':<10}{'ref ms':>9}{'cand ms':>10}{'raw x':>8}"
          f"{'95% CI':>14}{'counted x':>11}")
    rows = []
    for v in verdicts:
      t = v.timing
      if t is None:
        print(f"{v.task_id:<{width}}{v.status.value:<10}  (not timed)")
        rows.append({"task": v.task_id, "status": v.status.value})
        continue
      print(f"{v.task_id:<{width}}{v.status.value:<10}{1e3 * t.ref_seconds:>9.2f}"
            f"{1e3 * t.cand_seconds:>10.2f}{t.raw_speedup:>8.3f}"
            f"{f'{t.ci_low:.3f}-{t.ci_high:.3f}':>14}{t.speedup:>11.3f}")
      rows.append({"task": v.task_id, "status": v.status.value,
                   "ref_ms": 1e3 * t.ref_seconds, "cand_ms": 1e3 * t.cand_seconds,
                   "raw_speedup": t.raw_speedup, "speedup": t.speedup,
                   "ci": [t.ci_low, t.ci_high]})
  print(json.dumps({"band": band, "aa_ratios": env.calibration_ratios,
                    "interpret": env.interpret, "tasks": rows}))


if __name__ == "__main__":
  app.run(main)

"""Every generated task's solution through the real environment, once.

  python benchmarks/generated_tasks.py [--tasks=gen:all] [--reuse_workers]
      [--config.env.num_workers=2] [--json]

Counts specs per family and split, how many solutions come back `ok`
(interpret mode + the Triton lowering check on a CPU host), the statuses
of the rest, and the wall time. --reuse_workers judges with recycled
workers (64 candidates each, as the warm start does for its own code):
the same checks, without a fresh process per candidate. Progress goes to
stderr every --chunk candidates. With --json the last line is one object.
"""

import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from leap_jax.cli import fail, quiet_logging  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "leap.py"), "Run config (its env block).")
_TASKS = flags.DEFINE_string("tasks", "gen:all", "Task set to check.")
_REUSE = flags.DEFINE_bool("reuse_workers", False,
                           "Recycled workers (trusted code: ours).")
_CHUNK = flags.DEFINE_integer("chunk", 100, "Candidates per progress line.")
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object last.")


def main(argv):
  if len(argv) > 1:
    fail("generated_tasks", f"unexpected arguments: {argv[1:]}")
  quiet_logging()
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  from leap_jax import trainer  # pylint: disable=g-import-not-at-top
  from leap_jax.env.candidate import fence  # pylint: disable=g-import-not-at-top
  try:
    ids = kernels_pallas.resolve_tasks(_TASKS.value)
  except ValueError as e:
    fail("generated_tasks", str(e))
  start = time.monotonic()
  verdicts = []
  with trainer.make_env(_CONFIG.value, trusted=_REUSE.value) as env:
    for i in range(0, len(ids), _CHUNK.value):
      chunk = ids[i:i + _CHUNK.value]
      verdicts += env.evaluate([
          (t, fence(kernels_pallas.get_task(t).solution_candidate_source))
          for t in chunk])
      done = len(verdicts)
      print(f"{done}/{len(ids)} judged, {sum(v.correct for v in verdicts)} "
            f"ok, {time.monotonic() - start:.0f} s", file=sys.stderr,
            flush=True)
  seconds = time.monotonic() - start
  rows = collections.defaultdict(lambda: {"specs": 0, "train": 0, "eval": 0,
                                          "ok": 0})
  failures = {}
  for task_id, verdict in zip(ids, verdicts):
    family = "/".join(task_id.split("/")[:2])
    row = rows[family]
    row["specs"] += 1
    row[kernels_pallas.split_of(task_id)] += 1
    row["ok"] += verdict.correct
    if not verdict.correct:
      failures[task_id] = verdict.feedback
  print(f"{'family':<20} {'specs':>6} {'train':>6} {'eval':>6} {'ok':>6}")
  for family, row in sorted(rows.items()):
    print(f"{family:<20} {row['specs']:>6} {row['train']:>6} "
          f"{row['eval']:>6} {row['ok']:>6}")
  for task_id, feedback in list(failures.items())[:20]:
    print(f"NOT OK {task_id}: {feedback.splitlines()[0]}")
  where = "recycled" if _REUSE.value else "a fresh process per candidate"
  print(f"({len(ids)} solutions, {len(ids) - len(failures)} ok, "
        f"{seconds:.0f} s, {env.pool.size} workers, {where})")
  if _JSON.value:
    print(json.dumps({"families": rows, "solutions": len(ids),
                      "ok": len(ids) - len(failures), "seconds": seconds,
                      "reuse_workers": _REUSE.value,
                      "not_ok": sorted(failures)}))


if __name__ == "__main__":
  app.run(main)

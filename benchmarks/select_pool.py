"""Picks a pool of mid-difficulty tasks from runs' rollout dumps.

  python benchmarks/select_pool.py --workdir=runs/probe_frozen[,runs/other]
      [--min_share=0.25] [--max_share=0.75] [--count=0] [--out=pool.txt]

Tallies every dumped step's turn-1 answers per task, over all the runs
given, and keeps the tasks whose share judged ok lies in [min_share,
max_share]: those a policy can still learn on, and where DCP's groups are
mixed; with --count, only that many of them, those nearest one half. Run
it on frozen controls (--config.rl.learning_rate=0) so the tally is the
warm starts'. The pool (comma-separated ids, sorted) goes to stdout, or
--out; feed it to `leap_vs_full.py --eval_split=<pool>
--extra=--config.train_tasks=<pool>` (WORKSPACE.md, "The testbed").
configs/leap.py's LEVEL1_MIXED (`:level1`) is `--workdir=<the frozen
level-1 runs of seeds 0-2> --count=16`. Per-family counts go to stderr.
"""

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from leap_jax import rollout_dump  # noqa: E402
from leap_jax.cli import fail  # noqa: E402
from leap_jax.evaluation import level_of  # noqa: E402

_WORKDIR = flags.DEFINE_list("workdir", None, "Training runs' directories "
                             "(their rollouts/step_N.jsonl.gz), tallied "
                             "together.")
_MIN = flags.DEFINE_float("min_share", 0.25, "Least share of turn-1 answers "
                          "judged ok.")
_MAX = flags.DEFINE_float("max_share", 0.75, "Greatest share of turn-1 "
                          "answers judged ok.")
_COUNT = flags.DEFINE_integer("count", 0, "Keep this many of the tasks in "
                              "range, those nearest one half (0: all).")
_OUT = flags.DEFINE_string("out", "", "Write the pool here, not to stdout.")


def select(tally: dict[str, tuple[int, int]], min_share: float,
           max_share: float, count: int = 0) -> list[str]:
  """Sorted ids whose ok share is in [min_share, max_share]; with count,
  the count of them nearest one half (ties: the smaller id)."""
  share = {task: ok / n for task, (ok, n) in tally.items() if n}
  kept = [t for t, v in share.items() if min_share <= v <= max_share]
  if count:
    kept = sorted(kept, key=lambda t: (abs(share[t] - 0.5), t))[:count]
  return sorted(kept)


def main(argv):
  if len(argv) > 1:
    fail("select_pool", f"unexpected arguments: {argv[1:]}")
  if not _WORKDIR.value:
    fail("select_pool", "--workdir is required")
  if not 0 <= _MIN.value <= _MAX.value <= 1:
    fail("select_pool", "need 0 <= --min_share <= --max_share <= 1")
  if _COUNT.value < 0:
    fail("select_pool", "--count must be >= 0")
  rows, steps = [], []
  for workdir in _WORKDIR.value:
    steps = rollout_dump.steps(workdir)
    if not steps:
      fail("select_pool", f"no rollout dumps in {workdir} "
           "(config.rollouts_every)")
    rows += [r for s in steps for r in rollout_dump.read(workdir, s)]
  tally = rollout_dump.first_turn_tally(rows)
  pool = select(tally, _MIN.value, _MAX.value, _COUNT.value)
  kept = collections.Counter(map(level_of, pool))
  counts = ", ".join(f"{family} {kept[family]} of {n}" for family, n in
                     sorted(collections.Counter(map(level_of, tally)).items()))
  runs = len(_WORKDIR.value)
  print(f"{len(pool)} of {len(tally)} tasks with turn-1 ok share in "
        f"[{_MIN.value}, {_MAX.value}]"
        f"{f', the {_COUNT.value} nearest one half' if _COUNT.value else ''}"
        f" over steps {steps[0]}-{steps[-1]}"
        f"{f' of {runs} runs' if runs > 1 else ''}: {counts}", file=sys.stderr)
  if not pool:
    fail("select_pool", "no task in that range")
  text = ",".join(pool)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      f.write(text + "\n")
  else:
    print(text)


if __name__ == "__main__":
  app.run(main)

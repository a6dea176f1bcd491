"""Picks a pool of mid-difficulty tasks from a run's rollout dumps.

  python benchmarks/select_pool.py --workdir=runs/probe_frozen
      [--min_share=0.25] [--max_share=0.75] [--out=pool.txt]

Tallies every dumped step's turn-1 answers per task and keeps the tasks
whose share judged ok lies in [min_share, max_share]: those a policy can
still learn on, and where DCP's groups are mixed. Run it on a frozen
control (--config.rl.learning_rate=0) so the tally is the warm start's. The
pool (comma-separated ids, sorted) goes to stdout, or --out; feed it to
`leap_vs_full.py --eval_split=<pool> --extra=--config.train_tasks=<pool>`
(WORKSPACE.md, "The testbed"). Per-family counts go to stderr.
"""

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from leap_jax import rollout_dump  # noqa: E402
from leap_jax.cli import fail  # noqa: E402
from leap_jax.evaluation import level_of  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A training run's directory "
                               "(its rollouts/step_N.jsonl.gz).")
_MIN = flags.DEFINE_float("min_share", 0.25, "Least share of turn-1 answers "
                          "judged ok.")
_MAX = flags.DEFINE_float("max_share", 0.75, "Greatest share of turn-1 "
                          "answers judged ok.")
_OUT = flags.DEFINE_string("out", "", "Write the pool here, not to stdout.")


def select(tally: dict[str, tuple[int, int]], min_share: float,
           max_share: float) -> list[str]:
  """Sorted ids whose ok share is in [min_share, max_share]."""
  return sorted(task for task, (ok, n) in tally.items()
                if n and min_share <= ok / n <= max_share)


def main(argv):
  if len(argv) > 1:
    fail("select_pool", f"unexpected arguments: {argv[1:]}")
  if not _WORKDIR.value:
    fail("select_pool", "--workdir is required")
  if not 0 <= _MIN.value <= _MAX.value <= 1:
    fail("select_pool", "need 0 <= --min_share <= --max_share <= 1")
  steps = rollout_dump.steps(_WORKDIR.value)
  if not steps:
    fail("select_pool", f"no rollout dumps in {_WORKDIR.value} "
         "(config.rollouts_every)")
  rows = [r for s in steps for r in rollout_dump.read(_WORKDIR.value, s)]
  tally = rollout_dump.first_turn_tally(rows)
  pool = select(tally, _MIN.value, _MAX.value)
  kept = collections.Counter(map(level_of, pool))
  counts = ", ".join(f"{family} {kept[family]} of {n}" for family, n in
                     sorted(collections.Counter(map(level_of, tally)).items()))
  print(f"{len(pool)} of {len(tally)} tasks with turn-1 ok share in "
        f"[{_MIN.value}, {_MAX.value}] over steps {steps[0]}-{steps[-1]}: "
        f"{counts}", file=sys.stderr)
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

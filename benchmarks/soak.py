"""Soak and fault test of the kernel environment (leap_jax/env/soak.py).

Mixed candidates (correct, wrong, malformed and a share of the hostile
answers in tests/env/adversarial/) go through one KernelEnv in batches while
worker processes are SIGKILLed at random, half before and half after they
confirmed their job. Prints the counts and whether the invariants hold (exit
status 1 if not); last stdout line: one JSON object.

  python benchmarks/soak.py --num=200 --hostile=0.2
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from leap_jax.env import soak  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUM = flags.DEFINE_integer("num", 200, "Candidates in all.")
_HOSTILE = flags.DEFINE_float("hostile", 0.2, "Share of hostile candidates.")
_WORKERS = flags.DEFINE_integer("workers", 2, "Pool size.")
_BATCH = flags.DEFINE_integer("batch", 16, "Candidates per evaluate call.")
_KILL_EVERY = flags.DEFINE_float("kill_every_s", 2.0,
                                 "Mean seconds between kills.")
_DEADLINE = flags.DEFINE_float("deadline_s", 20.0, "Per-candidate deadline.")
_SEED = flags.DEFINE_integer("seed", 0, "Where the hostile ones go; kill times.")
_HOSTILE_DIR = flags.DEFINE_string(
    "hostile_dir", os.path.join(ROOT, "tests", "env", "adversarial"),
    "Hostile answers (# expect: header per file).")


def _inline(counter: dict) -> str:
  return ", ".join(f"{k} {v}" for k, v in counter.items()) or "-"


def print_table(c: dict) -> None:
  print(f"soak: {c['candidates']} candidates ({c['hostile']} hostile), "
        f"{c['pool_size']} workers, Pallas interpret mode on CPU")
  rows = [
      ("verdicts", c["verdicts"], f"missing {c['missing']}, duplicates "
       f"{c['duplicates']}, misattributed {c['misattributed']}"),
      ("not the expected status", c["unexpected"], ""),
      ("correct judged ok", f"{c['correct_ok']}/{c['correct']}", ""),
      ("harness_error verdicts", c["harness_error"],
       f"harness faults {c['harness_faults']}, each retried"),
      ("kills", c["kills"], _inline(c["kills_by_phase"])),
      ("retried", c["retried"], "ended as: " + _inline(c["retried_ended_as"])),
      ("live workers", f"{c['live_before']} -> {c['live_after']}",
       f"pool size {c['pool_size']}"),
      ("fresh correct after", c["after_soak"], ""),
      ("files outside sandbox", c["sentinel_files"], ""),
      ("seconds", c["seconds"], f"{c['candidates_per_s']} cand/s"),
  ]
  for name, value, note in rows:
    print(f"  {name:<26}{value!s:>10}  {note}")
  print("statuses: " + _inline(c["statuses"]))
  for kind, statuses in c["by_kind"].items():
    print(f"  {kind:<14}{_inline(statuses)}")
  for u in c["unexpected_examples"]:
    print(f"  unexpected: #{u['index']} {u['kind']} got {u['status']}, "
          f"want {'|'.join(u['expect'])}: {u['detail']}")


def main(argv):
  del argv
  counts = soak.soak(_NUM.value, _HOSTILE.value, _HOSTILE_DIR.value,
                     workers=_WORKERS.value, deadline_s=_DEADLINE.value,
                     batch_size=_BATCH.value, kill_every_s=_KILL_EVERY.value,
                     seed=_SEED.value)
  counts["problems"] = soak.problems(counts)
  print_table(counts)
  print("invariants: " + ("all hold" if not counts["problems"]
                          else "FAILED: " + ", ".join(counts["problems"])))
  print(json.dumps(counts))
  return 1 if counts["problems"] else 0


if __name__ == "__main__":
  app.run(main)

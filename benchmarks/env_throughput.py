"""Candidates per second through the kernel environment, by worker start method.

Same 64-candidate mixed batch (correct, wrong, no kernel, forbidden, syntax
error) through: the pool (forkserver with jax preloaded, a fresh process per
candidate), a fresh `python` interpreter per candidate (spawn), and recycled
workers (one process serves many candidates: fastest, but state can carry
over, so it is not the default). Last stdout line: one JSON object.

  python benchmarks/env_throughput.py [--batch=64] [--workers=1,2]
"""

import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import kernels_pallas  # noqa: E402
from leap_jax.env import candidate  # noqa: E402
from leap_jax.env import environment  # noqa: E402
from leap_jax.env import pool as pool_lib  # noqa: E402
from leap_jax.env import worker as worker_lib  # noqa: E402

_BATCH = flags.DEFINE_integer("batch", 64, "Candidates per batch.")
_WORKERS = flags.DEFINE_list("workers", ["2"], "Pool sizes to measure.")
_MODES = flags.DEFINE_list("modes", ["forkserver", "spawn", "recycled"],
                           "Worker start modes to measure.")

TASKS = ("level1/vector_add", "level1/relu", "level1/row_sum", "level1/matmul")


def mixed_batch(n: int) -> list[tuple[str, str]]:
  """Correct and broken answers in a fixed rotation."""
  batch = []
  for i in range(n):
    task = kernels_pallas.get_task(TASKS[i % len(TASKS)])
    source = task.solution_candidate_source
    kind = i % 8
    if kind == 5:  # plausible wrong kernel: drop the kernel's output scaling
      source = source.replace("o_ref[...] =", "o_ref[...] = 0.5 *", 1)
    elif kind == 6:
      source = "import jax.numpy as jnp\n\ndef kernel(*xs):\n  return xs[0]\n"
    elif kind == 7:
      source = "import os\n\ndef kernel(*xs):\n  return os.getpid()\n"
    batch.append((task.task_id, candidate.fence(source)))
  batch[3] = (batch[3][0], "```python\ndef kernel(x:\n```")
  return batch


def measure(mode: str, workers: int, batch) -> dict:
  recycled = mode == "recycled"
  setups = tuple(worker_lib.WorkerSetup(jobs_per_worker=len(batch) if recycled else 1)
                 for _ in range(workers))
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=workers, start_method="spawn" if mode == "spawn" else "forkserver",
      setups=setups, deadline_s=120))
  with environment.KernelEnv(config) as env:
    env.pool.prestart()
    start = time.perf_counter()
    verdicts = env.evaluate(batch)
    seconds = time.perf_counter() - start
  counts = collections.Counter(v.status.value for v in verdicts)
  return {"mode": mode, "workers": workers, "seconds": round(seconds, 2),
          "candidates_per_s": round(len(batch) / seconds, 3),
          "statuses": dict(sorted(counts.items()))}


def main(argv):
  del argv
  batch = mixed_batch(_BATCH.value)
  rows = [measure(mode, int(w), batch) for w in _WORKERS.value for mode in _MODES.value]
  base = {r["workers"]: r["candidates_per_s"] for r in rows if r["mode"] == "spawn"}
  print(f"{len(batch)} mixed candidates, {os.cpu_count()} CPU cores, "
        "Pallas interpret mode on CPU")
  print(f"{'mode':<12}{'workers':>8}{'seconds':>10}{'cand/s':>9}{'vs spawn':>10}  statuses")
  for r in rows:
    ratio = r["candidates_per_s"] / base[r["workers"]] if r["workers"] in base else float("nan")
    r["vs_spawn"] = round(ratio, 2)
    print(f"{r['mode']:<12}{r['workers']:>8}{r['seconds']:>10.1f}"
          f"{r['candidates_per_s']:>9.2f}{ratio:>9.2f}x  {r['statuses']}")
  print(json.dumps({"batch": len(batch), "rows": rows}))


if __name__ == "__main__":
  app.run(main)

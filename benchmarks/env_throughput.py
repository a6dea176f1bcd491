"""Candidates per second through the kernel environment, by worker start method.

The same mixed batch (correct, wrong, no kernel, forbidden, syntax error, no
code: leap_jax/env/soak.py's mixture) through: the pool (forkserver with jax
preloaded, a fresh process per candidate), a fresh `python` interpreter per
candidate (spawn), and recycled workers (one process serves many candidates:
fastest, but state can carry over, so it is not the default), each with pool
sizes 1 and 2. Pool overhead: the share of the workers' wall time (workers x
seconds) not spent in candidate phases (after a worker confirmed its job:
exec, trace, checks, trials, judging); the rest is worker start-up and
warm-up not hidden, process kills and the parent's screening and reference
outputs. Last stdout line: one JSON object.

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

from leap_jax.env import environment  # noqa: E402
from leap_jax.env import pool as pool_lib  # noqa: E402
from leap_jax.env import soak  # noqa: E402
from leap_jax.env import worker as worker_lib  # noqa: E402

_BATCH = flags.DEFINE_integer("batch", 64, "Candidates per batch.")
_WORKERS = flags.DEFINE_list("workers", ["1", "2"], "Pool sizes to measure.")
_MODES = flags.DEFINE_list("modes", ["forkserver", "spawn", "recycled"],
                           "Worker start modes to measure.")

def measure(mode: str, workers: int, batch) -> dict:
  recycled = mode == "recycled"
  setups = tuple(worker_lib.WorkerSetup(jobs_per_worker=len(batch) if recycled else 1)
                 for _ in range(workers))
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=workers, start_method="spawn" if mode == "spawn" else "forkserver",
      setups=setups, deadline_s=120))
  with environment.KernelEnv(config) as env:
    env.pool.prestart()
    with soak.PoolTap(env.pool) as tap:
      start = time.perf_counter()
      verdicts = env.evaluate(batch)
      seconds = time.perf_counter() - start
  counts = collections.Counter(v.status.value for v in verdicts)
  overhead = 1 - tap.candidate_seconds / (workers * seconds)
  return {"mode": mode, "workers": workers, "seconds": round(seconds, 2),
          "candidates_per_s": round(len(batch) / seconds, 3),
          "candidate_seconds": round(tap.candidate_seconds, 2),
          "pool_overhead": round(overhead, 3),
          "statuses": dict(sorted(counts.items()))}


def main(argv):
  del argv
  batch = soak.mixed_batch(_BATCH.value)
  rows = [measure(mode, int(w), batch) for w in _WORKERS.value for mode in _MODES.value]
  base = {r["workers"]: r["candidates_per_s"] for r in rows if r["mode"] == "spawn"}
  print(f"{len(batch)} mixed candidates, {os.cpu_count()} CPU cores, "
        "Pallas interpret mode on CPU")
  print(f"{'mode':<12}{'workers':>8}{'seconds':>10}{'cand/s':>9}{'vs spawn':>10}"
        f"{'overhead':>10}  statuses")
  for r in rows:
    ratio = r["candidates_per_s"] / base[r["workers"]] if r["workers"] in base else float("nan")
    r["vs_spawn"] = round(ratio, 2)
    print(f"{r['mode']:<12}{r['workers']:>8}{r['seconds']:>10.1f}"
          f"{r['candidates_per_s']:>9.2f}{ratio:>9.2f}x{r['pool_overhead']:>10.0%}"
          f"  {r['statuses']}")
  print(json.dumps({"batch": len(batch), "rows": rows}))


if __name__ == "__main__":
  app.run(main)

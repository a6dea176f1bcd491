"""Candidates per second through the kernel environment, by worker start path.

The same mixed batch (correct, wrong, no kernel, forbidden, syntax error, no
code: leap_jax/env/soak.py's mixture) through the pool with each start path:
  zygote      the default (after): workers forked from a clean process that
              preloaded everything that is safe before a fork, loading the
              warm-up's programs a warmer compiled once (compile_cache.py)
  zygote_unshared
              the same, each worker compiling its own warm-up (before)
  forkserver  before: the stdlib forkserver with the worker module imported;
              each worker then warms up on its own after the fork
  spawn       a fresh python per candidate (the baseline of the ratios)
  recycled    one process serves many candidates: fastest, but state carries
              over, so never used for the policy's answers
Every path but recycled starts one fresh process per candidate. Parent: the
seconds before the first job reached a worker (screening, fresh trial inputs
and reference outputs per task; the same for every path). Overhead per job:
the workers' wall time after that (workers x seconds) not spent in candidate
jobs (from the worker confirming its job to the pool having its outcome),
per job that reached a worker; the share counts the whole wall time. Phases: mean seconds per worker life (fork: asked ->
worker code runs; jail: OS layer; backend: XLA client and warm-up; wait: a
job waited for its worker's start-up; confine; job; teardown: outcome ->
process reaped and scratch removed, off the job's path). Last stdout line:
one JSON object.

  python benchmarks/env_throughput.py [--batch=64] [--workers=2] [--modes=...]
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
_WORKERS = flags.DEFINE_list("workers", ["2"], "Pool sizes to measure.")
_MODES = flags.DEFINE_list("modes", ["zygote", "zygote_unshared", "forkserver",
                                    "spawn", "recycled"],
                           "Worker start paths to measure.")
PHASES = ("fork", "jail", "backend", "wait", "confine", "job", "teardown")


def measure(mode: str, workers: int, batch) -> dict:
  recycled = mode == "recycled"
  setups = tuple(worker_lib.WorkerSetup(jobs_per_worker=len(batch) if recycled else 1)
                 for _ in range(workers))
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=workers,
      start_method="zygote" if mode in ("recycled", "zygote_unshared") else mode,
      share_warm_up=mode == "zygote", setups=setups, deadline_s=120))
  with environment.KernelEnv(config) as env:
    # Once per pool: the zygote's preload, the warmer's compiles.
    env.pool.warm_up_shared.wait(120)
    env.pool.prestart(wait=True)
    env.pool.lives.clear()
    with soak.PoolTap(env.pool) as tap:
      start = time.monotonic()
      verdicts = env.evaluate(batch)
      seconds = time.monotonic() - start
    jobs = sum(tap.attempts.values())
  parent = max(0.0, (tap.first_job or start) - start)
  lives = [life.phases() for life in env.pool.lives if life.started is not None]
  phases = {p: round(sum(l.get(p, 0.0) for l in lives) / max(1, len(lives)), 3)
            for p in PHASES}
  counts = collections.Counter(v.status.value for v in verdicts)
  idle = workers * seconds - tap.candidate_seconds
  return {"mode": mode, "workers": workers, "seconds": round(seconds, 2),
          "candidates_per_s": round(len(batch) / seconds, 3),
          "worker_jobs": jobs, "parent_s": round(parent, 2),
          "candidate_seconds": round(tap.candidate_seconds, 2),
          "pool_overhead": round(idle / (workers * seconds), 3),
          "overhead_s_per_job": round(
              (idle - workers * parent) / max(1, jobs), 3),
          "phases_s": phases, "statuses": dict(sorted(counts.items()))}


def main(argv):
  del argv
  batch = soak.mixed_batch(_BATCH.value)
  # The parent's jit caches (reference outputs, input makers) warm once, so
  # the first mode measured does not pay for the others.
  measure("recycled", 1, [(task, soak.benign("correct", task).answer)
                          for task in soak.TASKS])
  rows = [measure(mode, int(w), batch) for w in _WORKERS.value for mode in _MODES.value]
  base = {r["workers"]: r["candidates_per_s"] for r in rows if r["mode"] == "spawn"}
  print(f"{len(batch)} mixed candidates, {os.cpu_count()} CPU cores (shared: "
        "other jobs may run), Pallas interpret mode on CPU")
  print(f"{'mode':<16}{'workers':>8}{'seconds':>9}{'cand/s':>8}{'vs spawn':>10}"
        f"{'parent':>8}{'overhead':>10}{'s/job':>7}  "
        + " ".join(f"{p:>8}" for p in PHASES))
  for r in rows:
    ratio = r["candidates_per_s"] / base[r["workers"]] if r["workers"] in base else float("nan")
    r["vs_spawn"] = round(ratio, 2)
    print(f"{r['mode']:<16}{r['workers']:>8}{r['seconds']:>9.1f}"
          f"{r['candidates_per_s']:>8.2f}{ratio:>9.2f}x{r['parent_s']:>8.1f}"
          f"{r['pool_overhead']:>10.0%}"
          f"{r['overhead_s_per_job']:>7.2f}  "
          + " ".join(f"{r['phases_s'][p]:>8.3f}" for p in PHASES))
  print("parent: seconds before the first job; overhead: share of worker "
        "time not in jobs; s/job: seconds per job after the parent's part; "
        "phases: mean seconds per worker life; statuses: " +
        json.dumps(rows[0]["statuses"]))
  by = {(r["mode"], r["workers"]): r["candidates_per_s"] for r in rows}
  summary = {f"{a}_vs_{b}_{w}w": round(by[a, w] / by[b, w], 2)
             for w in {r["workers"] for r in rows}
             for a, b in (("zygote", "spawn"), ("zygote", "forkserver"),
                          ("zygote", "zygote_unshared"),
                          ("zygote_unshared", "spawn"), ("forkserver", "spawn"))
             if (a, w) in by and (b, w) in by}
  print(json.dumps({"batch": len(batch), "rows": rows, **summary}))


if __name__ == "__main__":
  app.run(main)

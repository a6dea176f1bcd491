"""The worker's start: what the zygote may do before a fork, and what not."""

import json
import os
import subprocess
import sys
import textwrap

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(code: str) -> dict:
  env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
         "OPENBLAS_NUM_THREADS": "1"}
  out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=300, env=env)
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.splitlines()[-1])


def test_preload_starts_no_thread_and_no_backend():
  """Safe to fork: one thread (a fork copies only the caller), no XLA
  client (its threads and locks would not survive one)."""
  got = _run("""
      import json
      from jax._src import xla_bridge
      from leap_jax.env import jail, worker
      worker.preload()
      print(json.dumps({"threads": jail.thread_count(),
                        "backends": list(xla_bridge._backends)}))
      """)
  assert got == {"threads": 1, "backends": []}


def test_a_full_warm_up_after_preload_imports_nothing_more():
  """Everything a worker would import lazily (and could then not import
  once confined) is loaded before the fork."""
  got = _run("""
      import json, sys
      from leap_jax.env import worker
      worker.preload()
      before = set(sys.modules)
      setup = worker.WorkerSetup()
      worker.configure_backend(setup)
      worker.warm_up(setup, full=True)
      new = sorted(m for m in set(sys.modules) - before
                   if m.split(".")[0] in ("jax", "jaxlib", "scipy", "numpy"))
      print(json.dumps(new))
      """)
  assert got == [], f"imported after preload: {got}"

"""The worker: its start (what the zygote may do before a fork), error text,
the checked program."""

import json
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from leap_jax.env import jaxpr_tools
from leap_jax.env import worker
from leap_jax.env.verdict import Status

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
      worker.warm_up(setup)
      new = sorted(m for m in set(sys.modules) - before
                   if m.split(".")[0] in ("jax", "jaxlib", "scipy", "numpy"))
      print(json.dumps(new))
      """)
  assert got == [], f"imported after preload: {got}"


def test_preload_loads_every_mlir_dialect():
  """MLIR imports a dialect's op classes when a lowering first builds one of
  its ops (math.absf for jnp.abs): which ones depends on the candidate."""
  got = _run("""
      import json, pkgutil, sys
      from leap_jax.env import worker
      worker.preload()
      import jaxlib.mlir.dialects as d
      print(json.dumps([m.name for m in pkgutil.iter_modules(
          d.__path__, "jaxlib.mlir.dialects.") if m.name not in sys.modules]))
      """)
  assert got == []


def _raise_deep(n, message_chars=100000):
  source = ("def f(n):\n  if n == 0:\n"
            f"    raise ValueError('x' * {message_chars})\n  f(n - 1)\n")
  namespace = {}
  exec(compile(source, worker.CANDIDATE_FILENAME, "exec"), namespace)  # noqa: S102
  try:
    namespace["f"](n)
  except ValueError as e:
    return e


def test_error_text_keeps_the_last_candidate_frames_and_is_capped():
  text = worker._error_text(_raise_deep(200))  # noqa: SLF001
  assert len(text) <= worker.MAX_ERROR_CHARS
  assert text.endswith("x" * 100 + "\n")
  frames = worker._error_text(_raise_deep(200, 10))  # noqa: SLF001
  # 20 frames: 3 printed, 16 folded by traceback, and the raising one
  assert frames.count('File "<candidate>"') == 4 and "repeated 16 more" in frames
  assert frames.endswith("ValueError: " + "x" * 10 + "\n")


def _copy_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...]


@pytest.fixture
def checked():
  shape = jax.ShapeDtypeStruct((64,), jnp.float32)
  def fn(x):
    spec = pl.BlockSpec((32,), lambda i: (i,))
    return pl.pallas_call(_copy_kernel, out_shape=shape, grid=(2,),
                          in_specs=[spec], out_specs=spec)(x)
  closed, _ = jaxpr_tools.trace(fn, [shape])
  verify = worker._verifier(lambda: None)  # noqa: SLF001
  return worker._Checked(closed, [shape], True, verify)  # noqa: SLF001


def test_checked_program_runs_ahead_of_time_compiled(checked):
  x = np.arange(64, dtype=np.float32)
  (out,) = checked(x)
  np.testing.assert_array_equal(np.asarray(out), x)
  with jax.disable_jit():  # never run eagerly: the executable refuses
    with pytest.raises(ValueError, match="Disable jit is not supported"):
      checked(x)


def test_outputs_must_have_the_traced_shapes(checked):
  checked.executable = lambda *args: [jnp.zeros(65, jnp.float32)]
  with pytest.raises(worker._Stop) as stop:  # noqa: SLF001
    checked(np.zeros(64, np.float32))
  assert stop.value.status is Status.RUNTIME_ERROR


def test_a_changed_state_is_forbidden():
  verify = worker._verifier(lambda: "jax.config.jax_disable_jit")  # noqa: SLF001
  with pytest.raises(worker._Stop) as stop:  # noqa: SLF001
    verify("the trials")
  assert stop.value.status is Status.FORBIDDEN
  assert "jax_disable_jit" in stop.value.detail and "the trials" in stop.value.detail

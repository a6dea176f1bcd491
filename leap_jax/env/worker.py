"""The worker process: confines itself, then checks, runs and times one candidate.

Lifecycle: start (imports and a warm-up, trusted) -> `ready` -> receive one
job -> confine (sandbox.py) -> `started` -> exec, trace, structural checks,
optional GPU lowering, trials -> `outputs` -> optionally time -> exit.
One candidate per process: nothing survives from one candidate to the next.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import sys
import tempfile
import traceback
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from leap_jax.env import jaxpr_tools
from leap_jax.env import sandbox
from leap_jax.env import screen
from leap_jax.env import timing
from leap_jax.env import wire
from leap_jax.env.verdict import Status

CANDIDATE_FILENAME = "<candidate>"


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
  """How a worker process prepares itself before it takes a job."""
  backend: str = "interpret"           # interpret | triton | mosaic
  visible_device: str | None = None    # CUDA_VISIBLE_DEVICES for GPU workers
  check_lowering: bool = True          # lower for cuda on CPU hosts
  isolate_network: bool = True
  jobs_per_worker: int = 1             # >1 recycles the process (benchmarks only)
  keep_stdio: bool = False             # debugging the harness only


class _Stop(Exception):
  """Ends the job with a verdict."""

  def __init__(self, status: Status, detail: str = ""):
    super().__init__(detail)
    self.status = status
    self.detail = detail


def configure_backend(setup: WorkerSetup) -> None:
  """Environment variables and jax flags; before jax creates a backend."""
  if setup.visible_device is not None:
    os.environ["CUDA_VISIBLE_DEVICES"] = setup.visible_device
  os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
  jax.config.update("jax_pallas_use_mosaic_gpu", setup.backend == "mosaic")
  if setup.backend == "interpret":
    # One core per worker: workers run side by side, and XLA's own thread
    # pool would make them fight over cores (and widen the timing noise).
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false"
                               " intra_op_parallelism_threads=1")
    jax.config.update("jax_platforms", "cpu")


def _warm_kernel(x_ref, o_ref):
  o_ref[...] = jnp.sum(x_ref[...] * 2.0, axis=-1, keepdims=True)


def warm_up(setup: WorkerSetup) -> None:
  """Loads jax's lazily imported modules before the audit hook is armed."""
  def fn(x):
    return pl.pallas_call(
        _warm_kernel, out_shape=jax.ShapeDtypeStruct((16, 1), x.dtype),
        grid=(1,), in_specs=[pl.BlockSpec((16, 16), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((16, 1), lambda i: (i, 0)))(x)
  shape = jax.ShapeDtypeStruct((16, 16), jnp.float32)
  closed, _ = jaxpr_tools.trace(fn, [shape])
  runnable = jaxpr_tools.with_pallas_interpret(
      closed, setup.backend == "interpret")
  jax.block_until_ready(jax.jit(jaxpr_tools.as_function(runnable))(
      jnp.ones((16, 16), jnp.float32)))
  if setup.check_lowering and setup.backend == "interpret":
    _lower_for_gpu(closed, [shape])
  # Calling an exported program initialises LAPACK (and imports scipy) once.
  # (For this worker's own platform: a GPU worker's arrays live on CUDA.)
  exported = jax.export.export(jax.jit(jnp.sin))(shape)
  jax.jit(jax.export.deserialize(exported.serialize()).call)(
      jnp.ones((16, 16), jnp.float32)).block_until_ready()
  traceback.format_exception(ValueError("warm"))


def _lower_for_gpu(closed, shapes) -> None:
  compiled_mode = jaxpr_tools.with_pallas_interpret(closed, False)
  jax.jit(jaxpr_tools.as_function(compiled_mode)).trace(*shapes).lower(
      lowering_platforms=("cuda",))


def _error_text(exc: BaseException) -> str:
  """The candidate's frames and the error message, harness frames dropped."""
  frames = [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename == CANDIDATE_FILENAME]
  lines = traceback.format_list(frames) if frames else []
  lines += traceback.format_exception_only(type(exc), exc)
  return "".join(lines)


def _classify(exc: BaseException, default: Status) -> _Stop:
  if isinstance(exc, _Stop):
    return exc
  if sandbox.VIOLATIONS.first():
    return _Stop(Status.FORBIDDEN,
                 f"Blocked by the sandbox: {sandbox.VIOLATIONS.first()}.")
  if isinstance(exc, MemoryError):
    return _Stop(Status.RUNTIME_ERROR, "MemoryError: over the memory limit.")
  return _Stop(default, _error_text(exc))


def _load_candidate(source: str):
  code = compile(source, CANDIDATE_FILENAME, "exec")
  module = {"__builtins__": sandbox.restricted_builtins(),
            "__name__": "candidate"}
  exec(code, module)  # noqa: S102  (confined: restricted builtins, audit hook)
  entry = module.get(screen.ENTRY_POINT)
  if not callable(entry):
    raise _Stop(Status.MISSING_ENTRY_POINT,
                f"`{screen.ENTRY_POINT}` is not a function.")
  return entry


def _check_structure(closed) -> None:
  callbacks = jaxpr_tools.host_callbacks(closed)
  if callbacks:
    raise _Stop(Status.FORBIDDEN, f"Host callbacks are not allowed: {callbacks}.")
  if jaxpr_tools.count_pallas_calls(closed) == 0:
    raise _Stop(Status.NO_KERNEL, "")
  outside = jaxpr_tools.compute_outside_kernels(closed)
  if outside:
    raise _Stop(Status.COMPUTE_OUTSIDE_KERNEL,
                f"Operations outside pallas_call: {', '.join(outside)}.")


# Modules whose globals a candidate could rewrite to change the verdict.
_WATCHED_MODULES = (
    "builtins", "jax", "jax.numpy", "jax.lax", "jax.core",
    "jax.experimental.pallas", "numpy", "time", "leap_jax.env.worker",
    "leap_jax.env.jaxpr_tools", "leap_jax.env.sandbox", "leap_jax.env.screen",
    "leap_jax.env.timing", "leap_jax.env.wire", "leap_jax.env.verdict")
_MISSING = object()


def _tamper_guard():
  """A check, bound now, that names what changed in the watched modules.

  jax and numpy may gain attributes (lazy submodules); the harness modules
  may not change at all.
  """
  modules, get_dict, missing = sys.modules, vars, _MISSING
  before = {name: (modules[name], dict(get_dict(modules[name])))
            for name in _WATCHED_MODULES if name in modules}

  def changed() -> str | None:
    for name, (module, attrs) in before.items():
      now = get_dict(module)
      for key, value in attrs.items():
        if now.get(key, missing) is not value:
          return f"{name}.{key}"
      if name.startswith("leap_jax.") and len(now) != len(attrs):
        return name
    return None
  return changed


def _tree_summary(out_shape) -> dict[str, Any]:
  leaves, treedef = jax.tree.flatten(out_shape)
  return {"treedef": str(treedef),
          "leaves": [[list(l.shape), jnp.dtype(l.dtype).name] for l in leaves]}


def run_job(job: dict[str, Any], setup: WorkerSetup, send) -> None:
  """Checks and runs one candidate; sends `outputs` (or a verdict)."""
  shapes = [jax.ShapeDtypeStruct(tuple(s), jnp.dtype(d))
            for s, d in job["arg_shapes"]]
  stage = Status.RUNTIME_ERROR
  tampered, stop, forbidden = _tamper_guard(), _Stop, Status.FORBIDDEN
  try:
    kernel = _load_candidate(job["source"])
    closed, out_shape = jaxpr_tools.trace(kernel, shapes)
    what = tampered()
    if what:
      raise stop(forbidden, f"Changing {what} is not allowed.")
    if sandbox.VIOLATIONS.first():
      raise _classify(RuntimeError(), Status.FORBIDDEN)
    _check_structure(closed)
    if job["check_lowering"] and setup.backend == "interpret":
      stage = Status.LOWERING_ERROR
      _lower_for_gpu(closed, shapes)
    stage = Status.RUNTIME_ERROR
    runnable = jaxpr_tools.with_pallas_interpret(
        closed, setup.backend == "interpret")
    fn = jax.jit(jaxpr_tools.as_function(runnable))
    outputs = []
    for trial in job["trial_inputs"]:
      outputs += [np.asarray(o) for o in fn(*trial)]
    what = tampered()
    if what:
      raise stop(forbidden, f"Changing {what} is not allowed.")
    if sandbox.VIOLATIONS.first():
      raise _classify(RuntimeError(), Status.FORBIDDEN)
  except BaseException as e:  # noqa: BLE001  (the candidate may raise anything)
    stop = _classify(e, stage)
    send({"kind": "verdict", "status": stop.status.value, "detail": stop.detail})
    return None
  send({"kind": "outputs", **_tree_summary(out_shape)}, outputs)
  return fn


def time_job(job: dict[str, Any], candidate_fn, send) -> None:
  """Interleaved reference-vs-candidate timing (reference is A)."""
  exported = jax.export.deserialize(job["reference_export"])
  reference_fn = jax.jit(exported.call)
  config = timing.TimingConfig(**job["timing"])
  times = timing.measure_interleaved(reference_fn, candidate_fn,
                                     job["trial_inputs"], config)
  send({"kind": "timing", "a_seconds": times.a_seconds,
        "b_seconds": times.b_seconds})


def confine(job: dict[str, Any], setup: WorkerSetup) -> bool:
  """Applies every sandbox layer; True if the network namespace took."""
  scratch = tempfile.mkdtemp(prefix="leap_cand_")
  os.chdir(scratch)
  isolated = setup.isolate_network and sandbox.isolate_network()
  if not setup.keep_stdio:
    sandbox.silence_stdio()
  sandbox.apply_limits(sandbox.Limits(**job["limits"]))
  sandbox.block_threads()
  sandbox.install_audit_hook(scratch, sandbox.read_roots(), CANDIDATE_FILENAME)
  return isolated


def _show_source_in_tracebacks(source: str) -> None:
  # Per job: a reused worker would otherwise quote its first candidate's
  # lines in a later candidate's traceback.
  linecache.cache[CANDIDATE_FILENAME] = (
      len(source), None, source.splitlines(True), CANDIDATE_FILENAME)


def main(conn, setup: WorkerSetup) -> None:
  """Entry point of a worker process (multiprocessing target)."""
  os.setsid()  # own process group: the pool kills the whole group
  def send(header, arrays=()):
    conn.send_bytes(wire.encode(header, list(arrays)))
  configure_backend(setup)
  warm_up(setup)
  send({"kind": "ready"})
  for index in range(setup.jobs_per_worker):
    job = conn.recv()
    _show_source_in_tracebacks(job["source"])
    if index == 0:
      isolated = confine(job, setup)
    send({"kind": "started", "network_isolated": isolated})
    _serve(job, setup, conn, send)


def _serve(job: dict[str, Any], setup: WorkerSetup, conn, send) -> None:
  if job.get("aa_calibration"):
    fn = jax.jit(jax.export.deserialize(job["reference_export"]).call)
    time_job(job, fn, send)
    return
  fn = run_job(job, setup, send)
  if fn is not None and conn.recv().get("time"):
    try:
      time_job(job, fn, send)
    except BaseException as e:  # noqa: BLE001
      send({"kind": "verdict", "status": Status.RUNTIME_ERROR.value,
            "detail": _error_text(e)})

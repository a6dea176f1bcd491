"""The worker process: confines itself, then checks, runs and times one candidate.

Lifecycle: forked from the zygote, which ran `preload` once (trusted) ->
OS layer (jail.enter: namespaces and mounts, while single-threaded) -> clean
environment -> XLA backend -> `ready` -> receive one job -> confine (uid,
rlimits, stdio, audit hook) -> `started` -> exec, trace, structural checks,
optional GPU lowering, trials -> `outputs` -> optionally time -> killed by
the pool. One candidate per process: nothing survives from one candidate to
the next.
"""

from __future__ import annotations

import dataclasses
import importlib
import linecache
import os
import pkgutil
import sys
import time
import traceback
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from leap_jax.env import allowlist
from leap_jax.env import compile_cache
from leap_jax.env import jail
from leap_jax.env import jaxpr_tools
from leap_jax.env import module_views
from leap_jax.env import quarantine
from leap_jax.env import races
from leap_jax.env import sandbox
from leap_jax.env import screen
from leap_jax.env import shared_inputs
from leap_jax.env import state_guard
from leap_jax.env import timing
from leap_jax.env import wire
from leap_jax.env.verdict import Status

CANDIDATE_FILENAME = module_views.CANDIDATE_FILENAME
MAX_ERROR_CHARS = 16 << 10   # error text sent to the pool: its tail
MAX_ERROR_FRAMES = 20


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
  """How a worker process prepares itself before it takes a job."""
  backend: str = "interpret"           # interpret | triton | mosaic
  visible_device: str | None = None    # CUDA_VISIBLE_DEVICES for GPU workers
  check_lowering: bool = True          # lower for cuda on CPU hosts
  jobs_per_worker: int = 1             # >1 recycles the process (benchmarks only)
  keep_stdio: bool = False             # debugging the harness only
  fill_compile_cache: bool = False     # a warmer: no job (compile_cache.py)


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


def _warm_fn(x):
  return pl.pallas_call(
      _warm_kernel, out_shape=jax.ShapeDtypeStruct((16, 1), x.dtype),
      grid=(1,), in_specs=[pl.BlockSpec((16, 16), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((16, 1), lambda i: (i, 0)))(x)


_WARM_SHAPE = jax.ShapeDtypeStruct((16, 16), jnp.float32)

# Imported lazily by jax the first time a Pallas kernel is lowered (Triton,
# Mosaic GPU), run in interpret mode, or an exported program is called
# (scipy's LAPACK). tests/env/test_worker.py checks that a full warm-up
# after `preload` imports nothing else.
_LAZY_MODULES = (
    "jax._src.pallas.triton.pallas_call_registration",
    "jax._src.pallas.mosaic_gpu.pallas_call_registration",
    "jax._src.pallas.mosaic.interpret.interpret_pallas_call",
    "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
    "jax._src.tpu_custom_call", "jax.experimental.mosaic.gpu",
    "jaxlib.mlir.dialects.mhlo", "scipy.linalg", "numpy.testing")
# MLIR's Python bindings import a dialect's op classes the first time an op
# of it is built, so which ones a lowering needs depends on the candidate's
# ops: every module of these packages is imported before confinement.
_DIALECT_PACKAGES = ("jaxlib.mlir.dialects", "jaxlib.triton",
                     "jaxlib.mosaic.python")


def _import_lazy_modules() -> None:
  """Everything harness code could import after confinement, where
  sandbox.seal_imports refuses any import (and the worker's uid may not
  even read a Python installed under a private home)."""
  for name in _LAZY_MODULES:
    importlib.import_module(name)
  for package in _DIALECT_PACKAGES:
    try:
      path = importlib.import_module(package).__path__
    except ImportError:  # a jaxlib built without it
      continue
    for info in pkgutil.iter_modules(path, package + "."):
      importlib.import_module(info.name)
  allowlist.import_all()  # a candidate's imports then never run module code


def preload() -> None:
  """What the zygote does once, before any fork: the imports a worker would
  otherwise make (allow-listed modules, jax's lazy ones) and a trace of the
  warm-up kernel. Never an XLA backend: it starts threads, and a fork copies
  only the forking thread (locks held by the others stay held)."""
  _import_lazy_modules()
  jaxpr_tools.trace(_warm_fn, [_WARM_SHAPE])
  traceback.format_exception(ValueError("warm"))
  # Taken once here (~0.7 s) and inherited by every fork; each worker's
  # warm-up then only rebases it (tens of ms).
  _BASELINE.append(state_guard.fingerprint())


def warm_up(setup: WorkerSetup, cache: str | None = None) -> None:
  """After the fork, before the audit hook is armed: the XLA backend, then
  what first use of it sets (compiling, running interpret mode, lowering for
  the GPU, an exported program; imports too where `preload` did not run),
  then the state fingerprint (or preload's rebased). jax sets module state
  on first use, so what the baseline holds is the state after it.
  cache: a directory of compiled warm-up programs (compile_cache.py), read,
  or written by a warmer; switched off again before the fingerprint."""
  jax.devices()
  if cache:
    compile_cache.enable(cache, fill=setup.fill_compile_cache)
  _import_lazy_modules()  # already done where the zygote preloaded
  closed, _ = jaxpr_tools.trace(_warm_fn, [_WARM_SHAPE])
  runnable = jaxpr_tools.with_pallas_interpret(
      closed, setup.backend == "interpret")
  jax.block_until_ready(jax.jit(jaxpr_tools.as_function(runnable))(
      jnp.ones((16, 16), jnp.float32)))
  if setup.check_lowering and setup.backend == "interpret":
    _lower_for_gpu(closed, [_WARM_SHAPE])
  # Calling an exported program initialises LAPACK (and imports scipy) once.
  # (For this worker's own platform: a GPU worker's arrays live on CUDA.)
  exported = jax.export.export(jax.jit(jnp.sin))(_WARM_SHAPE)
  jax.jit(jax.export.deserialize(exported.serialize()).call)(
      jnp.ones((16, 16), jnp.float32)).block_until_ready()
  traceback.format_exception(ValueError("warm"))
  if cache:
    compile_cache.disable(cache, keep_files=setup.fill_compile_cache)
  if _BASELINE:  # preload's, from before the fork: accept what warm-up set
    _BASELINE[-1][1]()
  else:
    _BASELINE.append(state_guard.fingerprint())  # ~0.7 s, off a candidate's clock


def _lower_for_gpu(closed, shapes) -> None:
  compiled_mode = jaxpr_tools.with_pallas_interpret(closed, False)
  jax.jit(jaxpr_tools.as_function(compiled_mode)).trace(*shapes).lower(
      lowering_platforms=("cuda",))


def _error_text(exc: BaseException) -> str:
  """The candidate's last frames and the error message, harness frames
  dropped, capped (the pool scrubs and caps it again)."""
  frames = [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename == CANDIDATE_FILENAME][-MAX_ERROR_FRAMES:]
  lines = traceback.format_list(frames) if frames else []
  lines += traceback.format_exception_only(type(exc), exc)
  return "".join(lines)[-MAX_ERROR_CHARS:]


def _classify(exc: BaseException, default: Status) -> _Stop:
  if isinstance(exc, _Stop):
    return exc
  if sandbox.VIOLATIONS.first():
    return _Stop(Status.FORBIDDEN,
                 f"Refused by the sandbox: {sandbox.VIOLATIONS.first()}.")
  if isinstance(exc, MemoryError):
    return _Stop(Status.RUNTIME_ERROR, "MemoryError: over the memory limit.")
  return _Stop(default, _error_text(exc))


def _load_candidate(source: str):
  code = compile(source, CANDIDATE_FILENAME, "exec")
  # A real module in sys.modules: dataclasses resolves string annotations
  # through it, and the methods it generates run with these restricted
  # builtins (not the interpreter's).
  module = types.ModuleType(module_views.CANDIDATE_MODULE)
  module.__dict__["__builtins__"] = sandbox.restricted_builtins()
  sys.modules[module_views.CANDIDATE_MODULE] = module
  exec(code, module.__dict__)  # noqa: S102  (confined: restricted builtins, audit hook)
  entry = module.__dict__.get(screen.ENTRY_POINT)
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


# The fingerprint warm_up takes (state_guard.py); run_job takes it out of
# here before the candidate runs, so that only run_job's frame holds it (a
# worker recycled for trusted code puts it back for its next job).
_BASELINE: list[tuple[state_guard.Check, Any]] = []


def _verifier(changed: state_guard.Check):
  """verify(after): raises a `forbidden` stop if jax's state is not the
  harness's or the sandbox recorded a violation (a tripwire among them).

  Made before the candidate runs, with what it uses bound then: the first
  check after candidate code ran must not look anything up that the
  candidate could have rebound. Once a check passes, the harness's modules
  are as they were, so what follows may use them.
  """
  stop, forbidden, classify = _Stop, Status.FORBIDDEN, _classify
  first_violation = sandbox.VIOLATIONS.first

  def verify(after: str) -> None:
    what = changed()
    if what:
      raise stop(forbidden,
                 f"Changing {what} is not allowed (seen after {after}).")
    if first_violation():
      raise classify(RuntimeError(), forbidden)
  return verify


class _Checked:
  """The compiled program of a checked jaxpr, and the check of the state it
  must run in."""

  def __init__(self, closed, shapes, interpret: bool, verify):
    runnable = jaxpr_tools.with_pallas_interpret(closed, interpret)
    # Ahead of time: jit's dispatch (and jax.disable_jit, a primitive's
    # impl) no longer stand between the checked jaxpr and what runs.
    self.executable = jax.jit(jaxpr_tools.as_function(runnable)).lower(
        *shapes).compile()
    self.out_avals = [(tuple(a.shape), jnp.dtype(a.dtype))
                      for a in closed.out_avals]
    self.verify = verify

  def __call__(self, *args):
    outputs = self.executable(*args)
    got = [(tuple(o.shape), jnp.dtype(o.dtype)) for o in outputs]
    if got != self.out_avals:  # the executable is the traced program's
      raise _Stop(Status.RUNTIME_ERROR,
                  f"Outputs {got} differ from the traced {self.out_avals}.")
    return outputs


def _tree_summary(out_shape) -> dict[str, Any]:
  leaves, treedef = jax.tree.flatten(out_shape)
  return {"treedef": str(treedef),
          "leaves": [[list(l.shape), jnp.dtype(l.dtype).name] for l in leaves]}


def run_job(job: dict[str, Any], setup: WorkerSetup, send) -> _Checked | None:
  """Checks and runs one candidate; sends `outputs` (or a verdict).

  The candidate's Python runs only until its program is traced. Then its
  code is sealed off (quarantine.py), jax's state is verified against the
  fingerprint taken before it ran (state_guard.py), and what is lowered,
  compiled, run and later timed is an ahead-of-time executable of the
  checked jaxpr, with the state verified again after each step.
  """
  shapes = [jax.ShapeDtypeStruct(tuple(s), jnp.dtype(d))
            for s, d in job["arg_shapes"]]
  stage = Status.RUNTIME_ERROR
  changed, rebase = (_BASELINE.pop() if _BASELINE
                     else state_guard.fingerprint())
  if setup.jobs_per_worker > 1:  # trusted code only: the next job reuses it
    _BASELINE.append((changed, rebase))
    quarantine.release()
    # The last job's module goes; rebase stops watching it.
    sys.modules.pop(module_views.CANDIDATE_MODULE, None)
  rebase()  # what the harness changed since (the sandbox's thread stubs)
  # Bound before the candidate runs (see _verifier).
  verify, classify = _verifier(changed), _classify
  seal, record = quarantine.seal, sandbox.VIOLATIONS.record
  quarantine.mark()
  try:
    kernel = _load_candidate(job["source"])
    closed, out_shape = jaxpr_tools.trace(kernel, shapes)
    summary = _tree_summary(out_shape)  # may call candidate pytree code
    verify("tracing")  # also: a context held open (disable_jit), a new rule
    seal(CANDIDATE_FILENAME, record)  # pending finalizers run in here
    verify("the candidate's finalizers")
    _check_structure(closed)
    if job.get("target_backend", "triton") == "triton":
      found = races.triton_races(closed)
      if found:
        raise _Stop(Status.FORBIDDEN, found[0])
    if job["check_lowering"] and setup.backend == "interpret":
      stage = Status.LOWERING_ERROR
      _lower_for_gpu(closed, shapes)
    stage = Status.RUNTIME_ERROR
    checked = _Checked(closed, shapes, setup.backend == "interpret", verify)
    verify("compiling")
    outputs = []
    for trial in job["trial_inputs"]:
      outputs += [np.asarray(o) for o in checked(*trial)]
    verify("the trials")
  except BaseException as e:  # noqa: BLE001  (the candidate may raise anything)
    stop = classify(e, stage)
    send({"kind": "verdict", "status": stop.status.value, "detail": stop.detail})
    return None
  send({"kind": "outputs", **summary}, outputs)
  return checked


def time_job(job: dict[str, Any], candidate, send) -> None:
  """Interleaved reference-vs-candidate timing (reference is A).

  Both sides are ahead-of-time executables; with a checked candidate, jax's
  state is verified after the timing too (a verdict replaces the timing).
  """
  try:
    exported = jax.export.deserialize(job["reference_export"])
    shapes = [jax.ShapeDtypeStruct(tuple(s), jnp.dtype(d))
              for s, d in job["arg_shapes"]]
    reference_fn = jax.jit(exported.call).lower(*shapes).compile()
    config = timing.TimingConfig(**job["timing"])
    checked = isinstance(candidate, _Checked)
    # The bare executable: its outputs were checked in the trials.
    times = timing.measure_interleaved(
        reference_fn, candidate.executable if checked else candidate,
        job["trial_inputs"], config)
    if checked:
      candidate.verify("the timing")
  except BaseException as e:  # noqa: BLE001
    stop = _classify(e, Status.RUNTIME_ERROR)
    send({"kind": "verdict", "status": stop.status.value, "detail": stop.detail})
    return
  send({"kind": "timing", "a_seconds": times.a_seconds,
        "b_seconds": times.b_seconds})


def confine(job: dict[str, Any], setup: WorkerSetup, scratch: str,
            report: jail.JailReport, jail_config: jail.JailConfig) -> None:
  """The layers applied right before the candidate runs, in this order:
  scratch as cwd and home, stdio to /dev/null, the unprivileged uid, rlimits,
  no new threads, the audit hook (the last: it would refuse the others)."""
  os.chdir(scratch)
  os.environ.update(HOME=scratch, TMPDIR=scratch)
  if not setup.keep_stdio:
    sandbox.silence_stdio()
  jail.drop_privileges(report, scratch, jail_config)
  # RLIMIT_NPROC counts a uid's tasks: meaningful only for a uid of its own.
  sandbox.apply_limits(sandbox.Limits(**job["limits"]), threads_now=(
      jail.thread_count() if report.own_uid else None))
  sandbox.block_threads()
  sandbox.seal_imports()
  sandbox.install_audit_hook(scratch, sandbox.read_roots(), CANDIDATE_FILENAME)


def _show_source_in_tracebacks(source: str) -> None:
  # Per job: a reused worker would otherwise quote its first candidate's
  # lines in a later candidate's traceback.
  linecache.cache[CANDIDATE_FILENAME] = (
      len(source), None, source.splitlines(True), CANDIDATE_FILENAME)


def main(conn, setup: WorkerSetup, scratch: str,
         jail_config: jail.JailConfig = jail.JailConfig(),
         forked_at: float | None = None) -> None:
  """Entry point of a worker process (the zygote's child, or a
  multiprocessing target)."""
  entered = time.monotonic()
  os.setsid()  # own process group: the pool kills the whole group
  def send(header, arrays=()):
    conn.send_bytes(wire.encode(header, list(arrays)))
  report = jail.enter(scratch, jail_config)
  jailed = time.monotonic()
  jail.clean_environment(jail_config)
  report.clean_environment = True
  configure_backend(setup)
  cache = (compile_cache.cache_dir(scratch) if setup.fill_compile_cache
           else compile_cache.stage(scratch))
  warm_up(setup, cache)
  send({"kind": "ready", "forked_at": forked_at, "entered": entered,
        "jailed": jailed, "warm": time.monotonic()})
  if setup.fill_compile_cache:  # a warmer: its entries, and no job
    send(*compile_cache.collect(cache))
    return
  for index in range(setup.jobs_per_worker):
    job = shared_inputs.receive_job(conn, jnp.dtype)
    _show_source_in_tracebacks(job["source"])
    if index == 0:
      confine(job, setup, scratch, report, jail_config)
    send({"kind": "started", "jail": dataclasses.asdict(report)})
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

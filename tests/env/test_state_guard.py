"""The fingerprint of jax's state: quiet under honest work, loud under tampering.

Every test that tampers restores what it changed, so the module's fingerprint
stays valid for the next one.
"""

import builtins
import contextlib
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.interpreters import mlir

from leap_jax.env import jaxpr_tools
from leap_jax.env import sandbox
from leap_jax.env import state_guard


def _add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def _honest_work():
  """Trace, lower for the GPU, compile and run a Pallas kernel."""
  def fn(x, y):
    spec = pl.BlockSpec((128,), lambda i: (i,))
    return pl.pallas_call(_add_kernel,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(4,), in_specs=[spec, spec], out_specs=spec)(x, y)
  shape = jax.ShapeDtypeStruct((512,), jnp.float32)
  closed, _ = jaxpr_tools.trace(fn, [shape, shape])
  jax.jit(jaxpr_tools.as_function(jaxpr_tools.with_pallas_interpret(
      closed, False))).trace(shape, shape).lower(lowering_platforms=("cuda",))
  run = jax.jit(jaxpr_tools.as_function(jaxpr_tools.with_pallas_interpret(
      closed, True))).lower(shape, shape).compile()
  np.asarray(run(np.ones(512, np.float32), np.ones(512, np.float32))[0])


@pytest.fixture(scope="module")
def module_guard():
  _honest_work()  # lazy imports and caches first, as a worker's warm-up does
  return state_guard.fingerprint()


@pytest.fixture
def guard(module_guard):
  # pytest rebinds warnings' globals around each test, and gc callbacks of
  # other test libraries (hypothesis) rebind theirs on every collection: the
  # first accepted here, as a worker accepts what its own sandbox set up
  # since the fingerprint, the second kept from running.
  enabled = gc.isenabled()
  gc.disable()
  module_guard[1]()
  yield module_guard
  if enabled:
    gc.enable()


def test_honest_work_changes_nothing(guard):
  changed, _ = guard
  _honest_work()
  assert changed() is None


@contextlib.contextmanager
def _restoring(obj, name):
  had = name in vars(obj)
  old = vars(obj).get(name)
  try:
    yield
  finally:
    if had:
      setattr(obj, name, old)
    else:
      delattr(obj, name)


def _held_open(context):
  def hold():
    with context:
      yield
  generator = hold()
  next(generator)
  return generator


def test_a_context_held_open_by_a_suspended_generator(guard):
  changed, _ = guard
  generator = _held_open(jax.disable_jit())
  try:
    assert changed() == "jax.config.jax_disable_jit"
  finally:
    generator.close()
  assert changed() is None


def test_a_config_flag(guard):
  changed, _ = guard
  old = jax.config.jax_default_matmul_precision
  jax.config.update("jax_default_matmul_precision", "bfloat16")
  try:
    assert changed() == "jax.config.jax_default_matmul_precision"
  finally:
    jax.config.update("jax_default_matmul_precision", old)
  assert changed() is None


def test_a_primitive_implementation(guard):
  changed, _ = guard
  with _restoring(pl.pallas_call_p, "impl"):
    pl.pallas_call_p.def_impl(lambda *args, **params: list(args))
    assert "pallas_call_p" in changed()
  assert changed() is None


def test_a_lowering_added_for_one_platform(guard):
  from jax._src.interpreters import mlir as mlir_internal  # noqa: PLC0415
  changed, _ = guard
  table = mlir_internal._platform_specific_lowerings["cpu"]  # noqa: SLF001
  assert jax.lax.sub_p not in table
  mlir.register_lowering(jax.lax.sub_p, mlir.lower_fun(
      jax.lax.add, multiple_results=False), platform="cpu")
  try:
    assert changed() == ("jax._src.interpreters.mlir."
                         "_platform_specific_lowerings[cpu]")
  finally:
    del table[jax.lax.sub_p]
  assert changed() is None


def test_a_method_replaced_on_a_class(guard):
  changed, _ = guard
  with _restoring(jax.stages.Compiled, "__call__"):
    jax.stages.Compiled.__call__ = lambda self, *args: args
    assert changed().endswith("Compiled")
  assert changed() is None


def test_a_module_global_rebound_and_a_harness_global_added(guard):
  changed, _ = guard
  with _restoring(np, "asarray"):
    np.asarray = np.array
    assert changed() == "numpy.asarray"
  with _restoring(sandbox, "EXTRA"):
    sandbox.EXTRA = 1  # harness modules may not even grow
    assert changed() == "leap_jax.env.sandbox.EXTRA"
  assert changed() is None


def test_the_last_uncaught_exception_is_not_a_change(guard):
  # The interpreter (and pytest, after a failed test) rebinds these.
  changed, _ = guard
  import sys  # noqa: PLC0415
  saved = {n: getattr(sys, n) for n in ("last_type", "last_value")
           if hasattr(sys, n)}
  sys.last_type, sys.last_value = ValueError, ValueError("x")
  try:
    assert changed() is None
  finally:
    for name in ("last_type", "last_value"):
      if name in saved:
        setattr(sys, name, saved[name])
      else:
        delattr(sys, name)
  assert changed() is None


def test_recorded_violations_cannot_be_erased(guard):
  changed, rebase = guard
  events = sandbox.VIOLATIONS._events  # noqa: SLF001
  events.append("x")
  rebase()
  try:
    events.clear()
    assert changed() == "leap_jax.env.sandbox.VIOLATIONS._events"
  finally:
    events.append("x")
    rebase()
    events.clear()
    rebase()


def test_caches_may_grow(guard):
  from jax._src import dtypes  # noqa: PLC0415
  changed, _ = guard
  cache = dtypes.finfo._finfo_cache  # noqa: SLF001
  key = object()
  cache[key] = None
  try:
    assert changed() is None
  finally:
    del cache[key]


def test_a_rebound_builtin_is_seen_and_does_not_blind_the_check(guard):
  changed, _ = guard
  saved = builtins.all
  builtins.all = lambda iterable: True
  try:
    assert changed() == "builtins.all"
    with _restoring(pl.pallas_call_p, "impl"):
      pl.pallas_call_p.def_impl(lambda *args, **params: list(args))
      assert changed() == "builtins.all"  # still the first difference
  finally:
    builtins.all = saved
  assert changed() is None


def test_rebase_accepts_the_present_state(guard):
  changed, rebase = state_guard.fingerprint()
  with _restoring(np, "asarray"):
    np.asarray = np.array
    assert changed() == "numpy.asarray"
    rebase()
    assert changed() is None
  assert changed() == "numpy.asarray"

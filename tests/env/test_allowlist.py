"""The allowlist tables and judging an object by what it is."""

import builtins
import importlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from leap_jax.env import allowlist


def test_import_all_loads_every_allowed_module():
  allowlist.import_all()
  assert all(name in sys.modules for name in allowlist.ALLOWED_MODULES)


@pytest.mark.parametrize("module,names", sorted(allowlist.MODULE_SUBSETS.items()))
def test_every_subset_name_exists_and_is_harmless(module, names):
  mod = importlib.import_module(module)
  for name in names:
    assert allowlist.forbidden_object(getattr(mod, name)) is None, name


def test_decorator_only_members_are_in_their_subsets():
  for path in allowlist.DECORATOR_ONLY:
    module, _, name = path.rpartition(".")
    assert allowlist.member_allowed(module, name)


@pytest.mark.parametrize("value", [
    plgpu.load, plgpu.store, plgpu.CompilerParams, pl.ds, pl.cdiv,
    pl.pallas_call, jax.lax.fori_loop, jnp.float32, np.finfo, np.prod,
    jax.jit, jax.vmap, jax.nn.sigmoid, jnp, plgpu,
])
def test_kernel_building_blocks_are_not_refused(value):
  assert allowlist.forbidden_object(value) is None


@pytest.mark.parametrize("value,why", [
    (jnp.load, "jax.numpy.load"),
    (jnp.save, "numpy.save"),          # jax.numpy re-exports numpy's save
    (np.memmap, "numpy.memmap"),
    (jax.device_get, "jax.device_get"),
    (jax.disable_jit, "jax.disable_jit"),
    (jax.config, "jax._src.config"),
    (jax.debug_nans, "jax._src.config"),
    (jax.checking_leaks, "jax._src.config"),   # a functools.partial of a flag
    (jax.default_device, "jax._src.config"),
    (pl.enable_debug_checks, "jax._src.config"),
    (jax.pure_callback, "jax._src.callback"),
    (jax.experimental.io_callback, "jax._src.callback"),
    (builtins.eval, "the builtin eval"),
    (builtins.open, "the builtin open"),
    (jax.debug, "jax.debug"),
    (jax.profiler, "jax.profiler"),
    (np.lib, "numpy.lib"),
])
def test_refused_by_identity_with_a_reason(value, why):
  reason = allowlist.forbidden_object(value)
  assert reason is not None and why in reason


def test_member_allowed_follows_the_subsets():
  assert allowlist.member_allowed("numpy", "float32")
  assert not allowlist.member_allowed("numpy", "save")
  assert allowlist.member_allowed("jax.numpy", "anything_public")
  assert not allowlist.member_allowed("jax", "_src")
  assert not allowlist.member_allowed("functools", "update_wrapper")

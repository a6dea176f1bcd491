import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from leap_jax.env import jaxpr_tools as jt

SHAPE = jax.ShapeDtypeStruct((16, 32), jnp.float32)


def _row_sum_kernel(x_ref, o_ref):
  o_ref[...] = jnp.sum(x_ref[...], axis=-1)


def _pallas_row_sum(x):
  return pl.pallas_call(_row_sum_kernel,
                        out_shape=jax.ShapeDtypeStruct((x.shape[0],), x.dtype))(x)


def test_glue_outside_and_compute_inside_is_clean():
  def fn(x):  # transposes and casts are glue; the sum is inside the kernel
    return _pallas_row_sum(x.T.T.astype(jnp.float32)).reshape(16, 1)
  closed, out = jt.trace(jax.jit(fn), [SHAPE])
  assert jt.count_pallas_calls(closed) == 1
  assert jt.compute_outside_kernels(closed) == []
  assert jt.host_callbacks(closed) == []
  assert out.shape == (16, 1)


def test_compute_outside_is_named():
  def fn(x):
    return _pallas_row_sum(x) + jnp.sum(x) + (x @ x.T)[0]
  closed, _ = jt.trace(fn, [SHAPE])
  names = jt.compute_outside_kernels(closed)
  assert {"add", "reduce_sum", "dot_general"} <= set(names)


def test_no_kernel_counts_zero():
  closed, _ = jt.trace(jnp.tanh, [SHAPE])
  assert jt.count_pallas_calls(closed) == 0


def test_callbacks_found_inside_nested_jit():
  def fn(x):
    y = jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return jax.jit(_pallas_row_sum)(y)
  closed, _ = jt.trace(fn, [SHAPE])
  assert jt.host_callbacks(closed) == ["pure_callback"]


def test_interpret_rewrite_runs_on_cpu_and_matches():
  closed, _ = jt.trace(jax.jit(_pallas_row_sum), [SHAPE])
  assert not jt.uses_interpret(closed)
  runnable = jt.with_pallas_interpret(closed, True)
  assert jt.uses_interpret(runnable)
  x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
  (out,) = jax.jit(jt.as_function(runnable))(x)
  np.testing.assert_allclose(out, x.sum(-1), rtol=1e-5, atol=1e-5)


def test_compiled_mode_lowers_for_triton_on_cpu_host():
  closed, _ = jt.trace(_pallas_row_sum, [SHAPE])
  with _mosaic_off():
    text = jax.jit(jt.as_function(jt.with_pallas_interpret(closed, False))).trace(
        SHAPE).lower(lowering_platforms=("cuda",)).as_text()
  assert "triton" in text


class _mosaic_off:
  def __enter__(self):
    self.prev = jax.config.jax_pallas_use_mosaic_gpu
    jax.config.update("jax_pallas_use_mosaic_gpu", False)

  def __exit__(self, *exc):
    jax.config.update("jax_pallas_use_mosaic_gpu", self.prev)

"""Triton GPU races found in the jaxpr: the racy idioms, and the idioms that are not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
from jax.extend import core as jex_core

import kernels_pallas
from leap_jax.env import jaxpr_tools
from leap_jax.env import races

MAT = jax.ShapeDtypeStruct((64, 64), jnp.float32)
VEC = jax.ShapeDtypeStruct((64,), jnp.float32)


def _call(kernel, out_map, grid=(4, 4), block=(16, 16), out_shape=(64, 16)):
  def fn(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(out_shape, x.dtype), grid=grid,
        in_specs=[pl.BlockSpec(block, lambda i, j: (i, j))],
        out_specs=pl.BlockSpec(block, out_map))(x)
  return jax.make_jaxpr(fn)(MAT)


def _accumulate(x_ref, o_ref):
  @pl.when(pl.program_id(1) == 0)
  def _():
    o_ref[...] = jnp.zeros_like(o_ref)
  o_ref[...] += x_ref[...]


def _last_program_writes(x_ref, o_ref):
  @pl.when(pl.program_id(1) == 3)
  def _():
    o_ref[...] = x_ref[...] * 2


def _always_true_guard(x_ref, o_ref):
  @pl.when(pl.program_id(1) >= 0)
  def _():
    o_ref[...] += x_ref[...]


def _loop_accumulate(x_ref, o_ref):
  def body(k, carry):
    o_ref[...] += x_ref[...]
    return carry
  jax.lax.fori_loop(0, 3, body, 0)


@pytest.mark.parametrize("kernel,out_map", [
    (_accumulate, lambda i, j: (i, 0)),
    (_accumulate, lambda i, j: (i, j * 0)),      # mentions j, ignores it
    (_accumulate, lambda i, j: (i, j // 4)),
    (_always_true_guard, lambda i, j: (i, 0)),
    (_loop_accumulate, lambda i, j: (i, 0)),
])
def test_accumulating_into_a_revisited_block_is_a_race(kernel, out_map):
  (reason,) = races.triton_races(_call(kernel, out_map))
  assert "grid axis 1 (size 4)" in reason and "output 0" in reason


@pytest.mark.parametrize("kernel,out_map", [
    (_accumulate, lambda i, j: (i, j)),          # every program its own block
    (_last_program_writes, lambda i, j: (i, 0)),  # one program per block
])
def test_own_blocks_and_single_writers_are_not_races(kernel, out_map):
  assert races.triton_races(_call(kernel, out_map,
                                  out_shape=(64, 64))) == []


def _whole_array(kernel):
  def fn(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64,), x.dtype),
                          grid=(4,))(x)
  return jax.make_jaxpr(fn)(VEC)


def test_triton_style_slices_by_program_id_are_not_races():
  def kernel(x_ref, o_ref):
    pid = pl.program_id(0)
    value = plgpu.load(x_ref.at[pl.ds(pid * 16, 16)])
    plgpu.store(o_ref.at[pl.ds(pid * 16, 16)], value + 1)
    o_ref[pl.ds(pid * 16, 16)] += value  # its own slice, read back
  assert races.triton_races(_whole_array(kernel)) == []


def test_triton_style_atomics_are_not_races():
  def kernel(x_ref, o_ref):
    pid = pl.program_id(0)
    plgpu.atomic_add(o_ref, pl.ds(0, 16), plgpu.load(x_ref.at[pl.ds(pid * 16, 16)]))
  assert races.triton_races(_whole_array(kernel)) == []


def test_whole_array_accumulation_is_a_race():
  def kernel(x_ref, o_ref):
    o_ref[pl.ds(0, 16)] += x_ref[pl.ds(pl.program_id(0) * 16, 16)]
  (reason,) = races.triton_races(_whole_array(kernel))
  assert "grid axis 0 (size 4)" in reason


def test_reduction_over_an_in_kernel_loop_is_not_a_race():
  def kernel(x_ref, o_ref):  # Triton-style matmul-like: loop over K inside
    def body(k, acc):
      return acc + x_ref[:, pl.ds(k * 16, 16)]
    o_ref[...] = jax.lax.fori_loop(0, 4, body, jnp.zeros((16, 16), jnp.float32))
  def fn(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64, 16), x.dtype),
                          grid=(4,), in_specs=[pl.BlockSpec((16, 64), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((16, 16), lambda i: (i, 0)))(x)
  assert races.triton_races(jax.make_jaxpr(fn)(MAT)) == []


@pytest.mark.parametrize("task_id", [
    "level1/avg_pool1d", "level1/avg_pool2d", "level1/conv1d", "level1/conv2d",
    "level1/causal_depthwise_conv1d", "level2/swiglu", "level2/conv2d_relu",
    "level3/conv_block", "level1/matmul", "level3/causal_attention"])
def test_task_solutions_that_accumulate_are_not_races(task_id):
  task = kernels_pallas.get_task(task_id)
  closed, _ = jaxpr_tools.trace(task.solution, task.input_shapes())
  assert races.triton_races(closed) == []


_INDEX_MAPS = [
    lambda i, j: (i * 2 + j, 0),
    lambda i, j: (i // 3, j % 2),
    lambda i, j: (jnp.minimum(i, 2), jnp.maximum(j - 1, 0)),
    lambda i, j: (jax.lax.div(i - 5, 2), jax.lax.rem(j - 3, 2)),
    lambda i, j: (jnp.where(i > j, i, j), -i),
    lambda i, j: (jnp.clip(i * j, 1, 5), 7),
]


@pytest.mark.parametrize("index_map", _INDEX_MAPS)
def test_index_map_evaluation_matches_jax(index_map):
  scalar = jax.ShapeDtypeStruct((), jnp.int32)
  closed = jax.make_jaxpr(index_map)(scalar, scalar)
  i, j = np.indices((5, 7)).reshape(2, -1)
  got = races._evaluate(closed.jaxpr, [i.astype(np.int64), j.astype(np.int64)])  # noqa: SLF001
  want = jax.vmap(jex_core.jaxpr_as_fun(closed))(jnp.asarray(i, jnp.int32),
                                                  jnp.asarray(j, jnp.int32))
  assert got is not None
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.broadcast_to(g, i.shape), np.asarray(w))


def test_index_maps_it_cannot_evaluate_fall_back_to_dependence():
  scalar = jax.ShapeDtypeStruct((), jnp.int32)
  closed = jax.make_jaxpr(lambda i, j: (jnp.sort(jnp.stack([i, j]))[0], 0))(
      scalar, scalar)
  assert races._evaluate(closed.jaxpr, [np.arange(3)] * 2) is None  # noqa: SLF001

# task: level1/vector_add
# Source: the Triton tutorial's vector add (triton-lang.org, "Vector
# Addition") written in Pallas' Triton dialect: the whole arrays as refs,
# offsets from pl.program_id, masked plgpu.load/plgpu.store on pl.ds slices,
# a grid of pl.cdiv(n, BLOCK_SIZE) programs and explicit num_warps.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BLOCK_SIZE = 1024


def add_kernel(x_ref, y_ref, output_ref, *, n_elements: int, block_size: int):
  pid = pl.program_id(axis=0)
  block_start = pid * block_size
  offsets = block_start + jnp.arange(block_size)
  mask = offsets < n_elements
  x = plgpu.load(x_ref.at[pl.ds(block_start, block_size)], mask=mask)
  y = plgpu.load(y_ref.at[pl.ds(block_start, block_size)], mask=mask)
  plgpu.store(output_ref.at[pl.ds(block_start, block_size)], x + y, mask=mask)


def add(x, y):
  n_elements = x.size
  return pl.pallas_call(
      functools.partial(add_kernel, n_elements=n_elements,
                        block_size=BLOCK_SIZE),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(pl.cdiv(n_elements, BLOCK_SIZE),),
      compiler_params=plgpu.CompilerParams(num_warps=4),
  )(x, y)


def kernel(x, y):
  return add(x, y)

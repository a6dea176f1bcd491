# task: level2/silu_mul
# Source: Triton-style fused elementwise kernel (jax/experimental/pallas/ops/
# gpu idiom of masked plgpu.load/plgpu.store): 2-D tiles addressed with
# pl.program_id and pl.ds, an `eviction_policy` hint on the streamed loads.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def silu_mul_kernel(gate_ref, up_ref, out_ref, *, block_rows: int):
  rows = pl.ds(pl.program_id(0) * block_rows, block_rows)
  g = plgpu.load(gate_ref.at[rows, :], eviction_policy="evict_first")
  u = plgpu.load(up_ref.at[rows, :], eviction_policy="evict_first")
  plgpu.store(out_ref.at[rows, :], g / (1.0 + jnp.exp(-g)) * u)


def kernel(gate, up):
  n, _ = gate.shape
  block_rows = 16
  return pl.pallas_call(
      functools.partial(silu_mul_kernel, block_rows=block_rows),
      out_shape=jax.ShapeDtypeStruct(gate.shape, gate.dtype),
      grid=(pl.cdiv(n, block_rows),),
      compiler_params=plgpu.CompilerParams(num_warps=8),
  )(gate, up)

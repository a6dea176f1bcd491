# task: level1/silu
# Source: block configuration in a frozen dataclass, as
# jax/experimental/pallas/ops/gpu/attention.py's BlockSizes (JAX authors,
# Apache-2.0; frozen, slots, a classmethod default); a 2-D elementwise
# SiLU kernel with BlockSpecs.
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


@dataclasses.dataclass(frozen=True, slots=True)
class BlockSizes:
  """Tile sizes of the elementwise kernel."""
  block_rows: int
  block_cols: int
  num_warps: int = 4

  @classmethod
  def get_default(cls):
    return BlockSizes(block_rows=32, block_cols=256)


def _silu_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = x * jax.nn.sigmoid(x)


def kernel(x, block_sizes: BlockSizes = BlockSizes.get_default()):
  n, d = x.shape
  spec = pl.BlockSpec((block_sizes.block_rows, block_sizes.block_cols),
                      lambda i, j: (i, j))
  return pl.pallas_call(
      _silu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(pl.cdiv(n, block_sizes.block_rows),
            pl.cdiv(d, block_sizes.block_cols)),
      in_specs=[spec], out_specs=spec,
      compiler_params=plgpu.CompilerParams(num_warps=block_sizes.num_warps),
  )(x)

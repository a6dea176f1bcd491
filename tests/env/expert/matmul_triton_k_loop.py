# task: level1/matmul
# Source: Triton's tiled matmul tutorial idiom in Pallas (as in
# jax/experimental/pallas/ops/gpu/attention.py's loops): block sizes in a
# typing.NamedTuple, pl.program_id for the tile, a jax.lax.fori_loop over K
# with pl.ds slices, plgpu.dot, and num_warps/num_stages in CompilerParams.
from typing import NamedTuple

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


class BlockSizes(NamedTuple):
  block_m: int = 64
  block_n: int = 64
  block_k: int = 32
  num_warps: int = 4
  num_stages: int = 3


def _matmul_kernel(a_ref, b_ref, o_ref, *, blocks: BlockSizes):
  pid_m, pid_n = pl.program_id(0), pl.program_id(1)
  rows = pl.ds(pid_m * blocks.block_m, blocks.block_m)
  cols = pl.ds(pid_n * blocks.block_n, blocks.block_n)
  k = a_ref.shape[1]

  def body(i, acc):
    ks = pl.ds(i * blocks.block_k, blocks.block_k)
    a = a_ref[rows, ks]
    b = b_ref[ks, cols]
    return acc + plgpu.dot(a, b)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, blocks.block_k), body,
                          jnp.zeros((blocks.block_m, blocks.block_n),
                                    jnp.float32))
  o_ref[rows, cols] = acc.astype(o_ref.dtype)


def kernel(a, b, blocks: BlockSizes = BlockSizes()):
  m, _ = a.shape
  _, n = b.shape
  return pl.pallas_call(
      functools.partial(_matmul_kernel, blocks=blocks),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      grid=(pl.cdiv(m, blocks.block_m), pl.cdiv(n, blocks.block_n)),
      compiler_params=plgpu.CompilerParams(num_warps=blocks.num_warps,
                                           num_stages=blocks.num_stages),
  )(a, b)

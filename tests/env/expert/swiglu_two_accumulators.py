# task: level2/swiglu
# Source: fused gated-MLP kernels (as in the Pallas GPU matmul examples and
# Triton's fused SwiGLU): one K loop feeds both products, block sizes in a
# frozen dataclass; the activation applied once per output tile.
import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


@dataclasses.dataclass(frozen=True)
class Tiles:
  m: int = 64
  f: int = 64
  k: int = 32


def swiglu_kernel(x_ref, wg_ref, wu_ref, o_ref, *, tiles: Tiles):
  def body(i, accs):
    gate, up = accs
    ks = pl.ds(i * tiles.k, tiles.k)
    x = x_ref[:, ks]
    gate = gate + plgpu.dot(x, wg_ref[ks, :])
    up = up + plgpu.dot(x, wu_ref[ks, :])
    return gate, up

  zeros = jnp.zeros((tiles.m, tiles.f), jnp.float32)
  gate, up = jax.lax.fori_loop(0, x_ref.shape[1] // tiles.k, body,
                               (zeros, zeros))
  o_ref[...] = (gate / (1.0 + jnp.exp(-gate)) * up).astype(o_ref.dtype)


def kernel(x, w_gate, w_up, tiles: Tiles = Tiles()):
  m, d = x.shape
  f = w_gate.shape[1]
  w_spec = pl.BlockSpec((d, tiles.f), lambda i, j: (0, j))
  return pl.pallas_call(
      functools.partial(swiglu_kernel, tiles=tiles),
      out_shape=jax.ShapeDtypeStruct((m, f), x.dtype),
      grid=(m // tiles.m, f // tiles.f),
      in_specs=[pl.BlockSpec((tiles.m, d), lambda i, j: (i, 0)), w_spec,
                w_spec],
      out_specs=pl.BlockSpec((tiles.m, tiles.f), lambda i, j: (i, j)),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(x, w_gate, w_up)

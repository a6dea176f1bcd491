# task: level3/gated_mlp_block
# Source: fused SwiGLU MLP as in the Triton/Pallas fused-MLP kernels of
# LLM inference stacks: the hidden axis walked in slices inside one program
# (jax.lax.fori_loop, pl.ds), gate and up products consumed by the down
# projection at once, the residual added in the epilogue.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def gated_mlp_kernel(x_ref, wg_ref, wu_ref, wd_ref, o_ref, *, block_f: int):
  x = x_ref[...]

  def body(f, acc):
    fs = pl.ds(pl.multiple_of(f * block_f, block_f), block_f)
    g = plgpu.dot(x, wg_ref[:, fs])
    u = plgpu.dot(x, wu_ref[:, fs])
    return acc + plgpu.dot(g / (1.0 + jnp.exp(-g)) * u, wd_ref[fs, :])

  acc = jax.lax.fori_loop(0, wg_ref.shape[1] // block_f, body,
                          jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = (x + acc).astype(o_ref.dtype)


def kernel(x, w_gate, w_up, w_down):
  m, d = x.shape
  f = w_gate.shape[1]
  block_m = 32
  return pl.pallas_call(
      functools.partial(gated_mlp_kernel, block_f=64),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(m // block_m,),
      in_specs=[pl.BlockSpec((block_m, d), lambda i: (i, 0)),
                pl.BlockSpec((d, f), lambda i: (0, 0)),
                pl.BlockSpec((d, f), lambda i: (0, 0)),
                pl.BlockSpec((f, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((block_m, d), lambda i: (i, 0)),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1),
  )(x, w_gate, w_up, w_down)

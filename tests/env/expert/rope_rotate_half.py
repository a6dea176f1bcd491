# task: level2/rope
# Source: the rotate-half RoPE of common LLM kernels (e.g. the Llama
# reference and its Triton ports), tiles over (head, sequence) with
# BlockSpecs; the halves as pl.ds slices of the loaded tile.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_S = 64


def rope_kernel(x_ref, cos_ref, sin_ref, o_ref):
  half = cos_ref.shape[-1]
  x1 = x_ref[:, pl.ds(0, half)]
  x2 = x_ref[:, pl.ds(half, half)]
  cos, sin = cos_ref[...], sin_ref[...]
  o_ref[:, pl.ds(0, half)] = x1 * cos - x2 * sin
  o_ref[:, pl.ds(half, half)] = x2 * cos + x1 * sin


def kernel(x, cos, sin):
  heads, seq, dim = x.shape
  half = dim // 2
  x_spec = pl.BlockSpec((None, BLOCK_S, dim), lambda h, s: (h, s, 0))
  cs_spec = pl.BlockSpec((BLOCK_S, half), lambda h, s: (s, 0))
  return pl.pallas_call(
      rope_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(heads, seq // BLOCK_S),
      in_specs=[x_spec, cs_spec, cs_spec], out_specs=x_spec,
  )(x, cos, sin)

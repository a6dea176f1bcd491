"""level2/rope: rotary position embedding (rotate-half convention)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Rotary position embedding, rotate-half convention. Inputs: x float32
[8, 256, 64] ([heads, seq, head_dim]), cos float32 [256, 32], sin float32
[256, 32] ([seq, head_dim / 2]). Output: float32 [8, 256, 64]; with
x1 = x[..., :32] and x2 = x[..., 32:] (same head and position):
out[..., :32] = x1 * cos - x2 * sin, out[..., 32:] = x2 * cos + x1 * sin."""
ATOL = 1e-5
RTOL = 1e-5
H, S, D = 8, 256, 64
BLOCK_S = 128


def make_inputs(key):
  k_x, k_t = jax.random.split(key)
  (x,) = _blocks.normals(k_x, ((H, S, D), 1.0))
  # Angles = position * frequency, as in RoPE; inputs are built here.
  (base,) = _blocks.uniforms(k_t, ((D // 2,), 0.5, 1.5))
  freqs = base * 10000.0 ** (-jnp.arange(D // 2) / (D // 2))
  angles = jnp.arange(S, dtype=jnp.float32)[:, None] * freqs[None, :]
  return x, jnp.cos(angles), jnp.sin(angles)


def reference(x, cos, sin):
  x1, x2 = jnp.split(x, 2, axis=-1)
  return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _rope_kernel(x_ref, cos_ref, sin_ref, o_ref):
  half = cos_ref.shape[1]
  x1 = x_ref[:, pl.ds(0, half)]
  x2 = x_ref[:, pl.ds(half, half)]
  cos, sin = cos_ref[...], sin_ref[...]
  o_ref[:, pl.ds(0, half)] = x1 * cos - x2 * sin
  o_ref[:, pl.ds(half, half)] = x2 * cos + x1 * sin


def solution(x, cos, sin):
  h, s, d = x.shape
  x_spec = pl.BlockSpec((None, BLOCK_S, d), lambda i, j: (i, j, 0))
  t_spec = pl.BlockSpec((BLOCK_S, d // 2), lambda i, j: (j, 0))
  return pl.pallas_call(
      _rope_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(h, s // BLOCK_S),
      in_specs=[x_spec, t_spec, t_spec],
      out_specs=x_spec,
  )(x, cos, sin)

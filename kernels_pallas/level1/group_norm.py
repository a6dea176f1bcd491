"""level1/group_norm: normalize over groups of channels and all positions."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Group norm with 8 groups. Inputs: x float32 [4, 32, 256] ([batch, channels,
positions]), gamma float32 [32], beta float32 [32]. Output: float32
[4, 32, 256]. Channels split into 8 consecutive groups of 4; for each batch b
and group g, mean and var (biased) are taken over the group's 4 channels and
all 256 positions together: out[b, c, p] = (x[b, c, p] - mean) /
sqrt(var + 1e-5) * gamma[c] + beta[c], with the stats of c's group."""
ATOL = 1e-4
RTOL = 1e-4
B, C, P = 4, 32, 256
GROUPS = 8


def make_inputs(key):
  k_x, k_m, k_p = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((B, C, P), 2.0))
  # Per-channel offsets: stats per channel (instance norm) or over all
  # channels (layer norm) give different answers from per-group stats.
  (mean,) = _blocks.normals(k_m, ((B, C, 1), 3.0))
  gamma, beta = _blocks.normals(k_p, ((C,), 0.5), ((C,), 0.5))
  return x + mean, 1.0 + gamma, beta


def reference(x, gamma, beta):
  b, c, p = x.shape
  g = x.reshape(b, GROUPS, c // GROUPS, p)
  mean = jnp.mean(g, axis=(2, 3), keepdims=True)
  var = jnp.mean((g - mean) ** 2, axis=(2, 3), keepdims=True)
  normed = ((g - mean) / jnp.sqrt(var + 1e-5)).reshape(b, c, p)
  return normed * gamma[None, :, None] + beta[None, :, None]


def _group_norm_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  # x_ref: one group's [channels_per_group, positions] slab of one sample.
  x = x_ref[...]
  mean = jnp.mean(x)
  centered = x - mean
  var = jnp.mean(centered * centered)
  normed = centered * jax.lax.rsqrt(var + 1e-5)
  o_ref[...] = normed * gamma_ref[...][:, None] + beta_ref[...][:, None]


def solution(x, gamma, beta):
  b, c, p = x.shape
  cg = c // GROUPS
  x_spec = pl.BlockSpec((None, cg, p), lambda i, g: (i, g, 0))
  vec_spec = pl.BlockSpec((cg,), lambda i, g: (g,))
  return pl.pallas_call(
      _group_norm_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(b, GROUPS),
      in_specs=[x_spec, vec_spec, vec_spec],
      out_specs=x_spec,
  )(x, gamma, beta)

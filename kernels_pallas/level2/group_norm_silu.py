"""level2/group_norm_silu: group norm then SiLU (diffusion U-Net style)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Group norm with 4 groups followed by SiLU. Inputs: x float32 [4, 64, 256]
([batch, channels, positions]), gamma float32 [64], beta float32 [64].
Output: float32 [4, 64, 256]. Channels split into 4 consecutive groups of 16;
mean and biased var per (batch, group) over the group's channels and all
positions: y = (x - mean) / sqrt(var + 1e-5) * gamma[c] + beta[c], then
out = y / (1 + exp(-y))."""
ATOL = 1e-4
RTOL = 1e-4
B, C, P = 4, 64, 256
GROUPS = 4


def make_inputs(key):
  k_x, k_m, k_p = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((B, C, P), 2.0))
  (mean,) = _blocks.normals(k_m, ((B, C, 1), 3.0))
  gamma, beta = _blocks.normals(k_p, ((C,), 0.5), ((C,), 0.5))
  return x + mean, 1.0 + gamma, beta


def reference(x, gamma, beta):
  b, c, p = x.shape
  g = x.reshape(b, GROUPS, c // GROUPS, p)
  mean = jnp.mean(g, axis=(2, 3), keepdims=True)
  var = jnp.mean((g - mean) ** 2, axis=(2, 3), keepdims=True)
  y = ((g - mean) / jnp.sqrt(var + 1e-5)).reshape(b, c, p)
  y = y * gamma[None, :, None] + beta[None, :, None]
  return y / (1.0 + jnp.exp(-y))


def _group_norm_silu_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  x = x_ref[...]  # one group of one sample: [channels_per_group, positions]
  centered = x - jnp.mean(x)
  var = jnp.mean(centered * centered)
  y = centered * jax.lax.rsqrt(var + 1e-5)
  y = y * gamma_ref[...][:, None] + beta_ref[...][:, None]
  o_ref[...] = y / (1.0 + jnp.exp(-y))


def solution(x, gamma, beta):
  b, c, p = x.shape
  cg = c // GROUPS
  x_spec = pl.BlockSpec((None, cg, p), lambda i, g: (i, g, 0))
  vec = pl.BlockSpec((cg,), lambda i, g: (g,))
  return pl.pallas_call(
      _group_norm_silu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(b, GROUPS),
      in_specs=[x_spec, vec, vec],
      out_specs=x_spec,
  )(x, gamma, beta)

"""level1/batch_norm: normalize each feature over the batch axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Batch norm with batch statistics (training mode). Inputs: x float32
[512, 256] ([batch, features]), gamma float32 [256], beta float32 [256].
Output: float32 [512, 256]. For each feature j, mean[j] and var[j] are taken
over the batch axis (axis 0; var is biased, dividing by 512):
out[i, j] = (x[i, j] - mean[j]) / sqrt(var[j] + 1e-5) * gamma[j] + beta[j]."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 512, 256
BLOCK_D = 16


def make_inputs(key):
  k_x, k_m, k_s, k_p = jax.random.split(key, 4)
  (x,) = _blocks.normals(k_x, ((N, D), 1.0))
  # Per-feature means and scales far from 0 and 1: normalizing over the
  # wrong axis, or not centering, shows.
  (mean,) = _blocks.normals(k_m, ((1, D), 3.0))
  (scale,) = _blocks.uniforms(k_s, ((1, D), 0.5, 3.0))
  gamma, beta = _blocks.normals(k_p, ((D,), 0.5), ((D,), 0.5))
  return x * scale + mean, 1.0 + gamma, beta


def reference(x, gamma, beta):
  mean = jnp.mean(x, axis=0, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=0, keepdims=True)
  return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def _batch_norm_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  # One program holds a strip of BLOCK_D features over the whole batch.
  x = x_ref[...]
  mean = jnp.mean(x, axis=0, keepdims=True)
  centered = x - mean
  var = jnp.mean(centered * centered, axis=0, keepdims=True)
  normed = centered * jax.lax.rsqrt(var + 1e-5)
  o_ref[...] = normed * gamma_ref[...][None, :] + beta_ref[...][None, :]


def solution(x, gamma, beta):
  n, d = x.shape
  col_spec = pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))
  vec_spec = pl.BlockSpec((BLOCK_D,), lambda j: (j,))
  return pl.pallas_call(
      _batch_norm_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[col_spec, vec_spec, vec_spec],
      out_specs=col_spec,
  )(x, gamma, beta)

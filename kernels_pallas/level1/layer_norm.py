"""level1/layer_norm: layer normalization over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Layer norm over the last axis. Inputs: x float32 [1024, 256], gamma float32
[256], beta float32 [256]. Output: float32 [1024, 256],
out = (x - mean) / sqrt(var + 1e-5) * gamma + beta, where mean and var are
taken over the last axis of x and var is the biased variance
(mean of (x - mean)**2, dividing by 256, not 255)."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 1024, 256
BLOCK_N = 16


def make_inputs(key):
  k_x, k_offset, k_params = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((N, D), 2.0))
  # Per-row means far from zero, so skipping the centering shows.
  (offset,) = _blocks.normals(k_offset, ((N, 1), 3.0))
  gamma, beta = _blocks.normals(k_params, ((D,), 0.5), ((D,), 0.5))
  return x + offset, 1.0 + gamma, beta


def reference(x, gamma, beta):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
  return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def _layer_norm_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  x = x_ref[...]
  mean = jnp.mean(x, axis=1, keepdims=True)
  centered = x - mean
  # Two passes (mean, then centered squares) avoid E[x^2] - E[x]^2 cancellation.
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  normed = centered * jax.lax.rsqrt(var + 1e-5)
  o_ref[...] = normed * gamma_ref[...][None, :] + beta_ref[...][None, :]


def solution(x, gamma, beta):
  n, d = x.shape
  row_spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  vec_spec = pl.BlockSpec((d,), lambda i: (0,))
  return pl.pallas_call(
      _layer_norm_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row_spec, vec_spec, vec_spec],
      out_specs=row_spec,
  )(x, gamma, beta)

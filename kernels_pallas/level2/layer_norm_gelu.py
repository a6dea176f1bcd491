"""level2/layer_norm_gelu: layer norm (no affine) then tanh-form GELU."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Layer norm over the last axis (no scale or shift) followed by GELU (tanh
approximation). Input x: float32 [2048, 128]. Output: float32 [2048, 128],
with y = (x - mean) / sqrt(var + 1e-5) (per-row mean and biased var):
out = 0.5 * y * (1 + tanh(sqrt(2 / pi) * (y + 0.044715 * y**3)))."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 2048, 128
BLOCK_N = 64


def make_inputs(key):
  return (_blocks.row_offsets(key, (N, D), 3.0, 10.0),)


def reference(x):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
  y = (x - mean) / jnp.sqrt(var + 1e-5)
  return 0.5 * y * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                   * (y + 0.044715 * y**3)))


def _layer_norm_gelu_kernel(x_ref, o_ref):
  x = x_ref[...]
  centered = x - jnp.mean(x, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  y = centered * jax.lax.rsqrt(var + 1e-5)
  o_ref[...] = 0.5 * y * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                         * (y + 0.044715 * y * y * y)))


def solution(x):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _layer_norm_gelu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row],
      out_specs=row,
  )(x)

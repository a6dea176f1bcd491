"""level2/layer_norm_relu: layer norm then ReLU, one pass over each row."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Layer norm over the last axis followed by ReLU. Inputs: x float32
[1024, 256], gamma float32 [256], beta float32 [256]. Output: float32
[1024, 256], out = max((x - mean) / sqrt(var + 1e-5) * gamma + beta, 0),
with per-row mean and biased var of x."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 1024, 256
BLOCK_N = 32


def make_inputs(key):
  k_x, k_off, k_p = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((N, D), 2.0))
  (offset,) = _blocks.normals(k_off, ((N, 1), 3.0))
  gamma, beta = _blocks.normals(k_p, ((D,), 0.5), ((D,), 0.5))
  return x + offset, 1.0 + gamma, beta


def reference(x, gamma, beta):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
  return jnp.maximum((x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta, 0.0)


def _layer_norm_relu_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  x = x_ref[...]
  centered = x - jnp.mean(x, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  y = centered * jax.lax.rsqrt(var + 1e-5) * gamma_ref[...][None, :]
  o_ref[...] = jnp.maximum(y + beta_ref[...][None, :], 0.0)


def solution(x, gamma, beta):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  vec = pl.BlockSpec((d,), lambda i: (0,))
  return pl.pallas_call(
      _layer_norm_relu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row, vec, vec],
      out_specs=row,
  )(x, gamma, beta)

"""level2/batch_norm_relu: batch-statistics normalization then ReLU."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Batch norm (batch statistics) followed by ReLU. Inputs: x float32 [256, 512]
([batch, features]), gamma float32 [512], beta float32 [512]. Output:
float32 [256, 512], with mean[j] and biased var[j] over the batch axis 0:
out[i, j] = max((x[i, j] - mean[j]) / sqrt(var[j] + 1e-5) * gamma[j] +
beta[j], 0)."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 256, 512
BLOCK_D = 32


def make_inputs(key):
  k_x, k_m, k_s, k_p = jax.random.split(key, 4)
  (x,) = _blocks.normals(k_x, ((N, D), 1.0))
  (mean,) = _blocks.normals(k_m, ((1, D), 3.0))
  (scale,) = _blocks.uniforms(k_s, ((1, D), 0.5, 3.0))
  gamma, beta = _blocks.normals(k_p, ((D,), 0.5), ((D,), 0.5))
  return x * scale + mean, 1.0 + gamma, beta


def reference(x, gamma, beta):
  mean = jnp.mean(x, axis=0, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=0, keepdims=True)
  return jnp.maximum((x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta, 0.0)


def _batch_norm_relu_kernel(x_ref, gamma_ref, beta_ref, o_ref):
  x = x_ref[...]  # all rows of BLOCK_D features
  centered = x - jnp.mean(x, axis=0, keepdims=True)
  var = jnp.mean(centered * centered, axis=0, keepdims=True)
  y = centered * jax.lax.rsqrt(var + 1e-5) * gamma_ref[...][None, :]
  o_ref[...] = jnp.maximum(y + beta_ref[...][None, :], 0.0)


def solution(x, gamma, beta):
  n, d = x.shape
  col = pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))
  vec = pl.BlockSpec((BLOCK_D,), lambda j: (j,))
  return pl.pallas_call(
      _batch_norm_relu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[col, vec, vec],
      out_specs=col,
  )(x, gamma, beta)

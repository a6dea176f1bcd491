"""level2/rmsnorm_residual: RMSNorm of (x + residual), fused."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Residual add then RMSNorm over the last axis. Inputs: x float32 [2048, 256],
residual float32 [2048, 256], weight float32 [256]. Output: float32
[2048, 256], with h = x + residual:
out = h / sqrt(mean(h * h, axis=-1, keepdims=True) + 1e-6) * weight."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 2048, 256
BLOCK_N = 32


def make_inputs(key):
  k_act, k_scale, k_weight = jax.random.split(key, 3)
  x, residual = _blocks.normals(k_act, ((N, D), 1.0), ((N, D), 1.0))
  # Rows of very different sizes: a wrong normalizer cannot hide.
  row_scale = jnp.exp(jax.random.uniform(k_scale, (N, 1), jnp.float32,
                                         -2.0, 2.0))
  (weight,) = _blocks.normals(k_weight, ((D,), 0.5))
  return x * row_scale, residual * row_scale, 1.0 + weight


def reference(x, residual, weight):
  h = x + residual
  return h / jnp.sqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6) * weight


def _rmsnorm_residual_kernel(x_ref, res_ref, w_ref, o_ref):
  # The sum h lives only in registers; unfused it would round-trip memory.
  h = x_ref[...] + res_ref[...]
  inv_rms = jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + 1e-6)
  o_ref[...] = h * inv_rms * w_ref[...][None, :]


def solution(x, residual, weight):
  n, d = x.shape
  row_spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _rmsnorm_residual_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row_spec, row_spec, pl.BlockSpec((d,), lambda i: (0,))],
      out_specs=row_spec,
  )(x, residual, weight)

"""level2/rms_norm_silu: RMSNorm with a learned scale, then SiLU."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
RMSNorm over the last axis followed by SiLU. Inputs: x float32 [1024, 512],
weight float32 [512]. Output: float32 [1024, 512], with
y = x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6) * weight:
out = y / (1 + exp(-y))."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  k_x, k_s, k_w = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((N, D), 1.0))
  (s,) = _blocks.uniforms(k_s, ((N, 1), 0.25, 4.0))
  (w,) = _blocks.normals(k_w, ((D,), 1.0))
  return x * s, 1.0 + w


def reference(x, weight):
  y = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * weight
  return y / (1.0 + jnp.exp(-y))


def _rms_norm_silu_kernel(x_ref, w_ref, o_ref):
  x = x_ref[...]
  inv_rms = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + 1e-6)
  y = x * inv_rms * w_ref[...][None, :]
  o_ref[...] = y / (1.0 + jnp.exp(-y))


def solution(x, weight):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _rms_norm_silu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row, pl.BlockSpec((d,), lambda i: (0,))],
      out_specs=row,
  )(x, weight)

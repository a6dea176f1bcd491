"""level2/add_rms_norm_bf16: bf16 residual add then RMSNorm, f32 math inside."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
bfloat16 residual add then RMSNorm over the last axis. Inputs: x bfloat16
[2048, 512], residual bfloat16 [2048, 512], weight bfloat16 [512]. Output:
bfloat16 [2048, 512], computed in float32 and rounded once: with
h = x + residual, out = h / sqrt(mean(h * h, axis=-1, keepdims=True) + 1e-6)
* weight."""
ATOL = _blocks.BF16_ATOL
RTOL = _blocks.BF16_RTOL
N, D = 2048, 512
BLOCK_N = 64


def make_inputs(key):
  k_x, k_s, k_w = jax.random.split(key, 3)
  x, residual = _blocks.normals(k_x, ((N, D), 1.0), ((N, D), 1.0))
  (s,) = _blocks.uniforms(k_s, ((N, 1), 0.25, 4.0))
  (w,) = _blocks.normals(k_w, ((D,), 0.5))
  return _blocks.bf16(x * s, residual, 1.0 + w)


def reference(x, residual, weight):
  h = x.astype(jnp.float32) + residual.astype(jnp.float32)
  rms = jnp.sqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6)
  return (h / rms * weight.astype(jnp.float32)).astype(jnp.bfloat16)


def _add_rms_norm_bf16_kernel(x_ref, r_ref, w_ref, o_ref):
  # Upcast before the add: the mean of squares over 512 entries in bf16
  # would lose most of its bits.
  h = x_ref[...].astype(jnp.float32) + r_ref[...].astype(jnp.float32)
  inv_rms = jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + 1e-6)
  y = h * inv_rms * w_ref[...].astype(jnp.float32)[None, :]
  o_ref[...] = y.astype(o_ref.dtype)


def solution(x, residual, weight):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _add_rms_norm_bf16_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row, row, pl.BlockSpec((d,), lambda i: (0,))],
      out_specs=row,
  )(x, residual, weight)

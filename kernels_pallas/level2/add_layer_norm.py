"""level2/add_layer_norm: residual add then layer norm, one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Residual add then layer norm over the last axis. Inputs: x float32
[2048, 256], residual float32 [2048, 256], gamma float32 [256], beta float32
[256]. Output: float32 [2048, 256], with h = x + residual and per-row mean
and biased var of h: out = (h - mean) / sqrt(var + 1e-5) * gamma + beta."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 2048, 256
BLOCK_N = 64


def make_inputs(key):
  k_x, k_r, k_p = jax.random.split(key, 3)
  x = _blocks.row_offsets(k_x, (N, D), 1.0, 3.0)
  (residual,) = _blocks.normals(k_r, ((N, D), 2.0))
  gamma, beta = _blocks.normals(k_p, ((D,), 0.5), ((D,), 0.5))
  return x, residual, 1.0 + gamma, beta


def reference(x, residual, gamma, beta):
  h = x + residual
  mean = jnp.mean(h, axis=-1, keepdims=True)
  var = jnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
  return (h - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def _add_layer_norm_kernel(x_ref, r_ref, gamma_ref, beta_ref, o_ref):
  h = x_ref[...] + r_ref[...]
  centered = h - jnp.mean(h, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  o_ref[...] = (centered * jax.lax.rsqrt(var + 1e-5) * gamma_ref[...][None, :]
                + beta_ref[...][None, :])


def solution(x, residual, gamma, beta):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  vec = pl.BlockSpec((d,), lambda i: (0,))
  return pl.pallas_call(
      _add_layer_norm_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row, row, vec, vec],
      out_specs=row,
  )(x, residual, gamma, beta)

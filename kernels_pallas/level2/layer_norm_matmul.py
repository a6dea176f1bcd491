"""level2/layer_norm_matmul: pre-norm linear, LN(x) @ w in one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Layer norm then a matrix multiply. Inputs: x float32 [512, 256], gamma
float32 [256], beta float32 [256], w float32 [256, 512]. Output: float32
[512, 512], out = ((x - mean) / sqrt(var + 1e-5) * gamma + beta) @ w, with
per-row mean and biased var of x."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, D, N = 512, 256, 512
BLOCK_M, BLOCK_N = 64, 128


def make_inputs(key):
  k_x, k_p, k_w = jax.random.split(key, 3)
  x = _blocks.row_offsets(k_x, (M, D), 2.0, 5.0)
  gamma, beta = _blocks.normals(k_p, ((D,), 0.5), ((D,), 0.5))
  (w,) = _blocks.normals(k_w, ((D, N), _blocks.fan_in(D)))
  return x, 1.0 + gamma, beta, w


def reference(x, gamma, beta, w):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
  return ((x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta) @ w


def _layer_norm_matmul_kernel(x_ref, gamma_ref, beta_ref, w_ref, o_ref):
  # The row strip holds whole rows (all of D), so it normalizes in place and
  # feeds the dot directly; the normalized x never goes back to memory.
  x = x_ref[...]
  centered = x - jnp.mean(x, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  y = (centered * jax.lax.rsqrt(var + 1e-5) * gamma_ref[...][None, :]
       + beta_ref[...][None, :])
  o_ref[...] = jnp.dot(y, w_ref[...], preferred_element_type=jnp.float32)


def solution(x, gamma, beta, w):
  m, d = x.shape
  n = w.shape[1]
  vec = pl.BlockSpec((d,), lambda i, j: (0,))
  return pl.pallas_call(
      _layer_norm_matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i, j: (i, 0)), vec, vec,
                pl.BlockSpec((d, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(x, gamma, beta, w)

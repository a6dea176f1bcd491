"""level1/l2_normalize: scale each row to unit Euclidean norm."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row L2 normalization. Input x: float32 [2048, 256]. Output: float32
[2048, 256], out[i, j] = x[i, j] / max(sqrt(sum_k x[i, k]**2), 1e-12)."""
ATOL = 1e-6
RTOL = 1e-5
N, D = 2048, 256
BLOCK_N = 64


def make_inputs(key):
  k_x, k_s = jax.random.split(key)
  (x,) = _blocks.normals(k_x, ((N, D), 1.0))
  # Rows of different scales: a kernel that skips the division shows.
  (s,) = _blocks.uniforms(k_s, ((N, 1), 0.25, 4.0))
  return (x * s,)


def reference(x):
  norm = jnp.sqrt(jnp.sum(x * x, axis=1, keepdims=True))
  return x / jnp.maximum(norm, 1e-12)


def _l2_normalize_kernel(x_ref, o_ref):
  x = x_ref[...]
  norm = jnp.sqrt(jnp.sum(x * x, axis=1, keepdims=True))
  o_ref[...] = x / jnp.maximum(norm, 1e-12)


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _l2_normalize_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)

"""level1/row_l2_norm: Euclidean norm of each row."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row L2 norm. Input x: float32 [2048, 256]. Output: float32 [2048],
out[i] = sqrt(sum_j x[i, j]**2)."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 2048, 256
BLOCK_N = 64


def make_inputs(key):
  k_x, k_s = jax.random.split(key)
  (x,) = _blocks.normals(k_x, ((N, D), 1.0))
  # Rows of different scales, so the norms spread out.
  (s,) = _blocks.uniforms(k_s, ((N, 1), 0.5, 2.0))
  return (x * s,)


def reference(x):
  return jnp.sqrt(jnp.sum(x * x, axis=1))


def _row_l2_norm_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.sqrt(jnp.sum(x * x, axis=1))


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_l2_norm_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)

"""level1/mse_loss: per-sample mean squared error."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Per-sample mean squared error. Inputs: pred float32 [1024, 512], target
float32 [1024, 512]. Output: float32 [1024],
out[i] = mean_j (pred[i, j] - target[i, j])**2."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  k_t, k_e, k_s = jax.random.split(key, 3)
  target, err = _blocks.normals(k_t, ((N, D), 1.0), ((N, D), 1.0))
  (scale,) = _blocks.uniforms(k_s, ((N, 1), 0.2, 2.0))
  return target + err * scale, target


def reference(pred, target):
  return jnp.mean((pred - target) ** 2, axis=1)


def _mse_kernel(pred_ref, target_ref, o_ref):
  diff = pred_ref[...] - target_ref[...]
  o_ref[...] = jnp.mean(diff * diff, axis=1)


def solution(pred, target):
  n, d = pred.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _mse_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
      grid=(n // BLOCK_N,),
      in_specs=[spec, spec],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(pred, target)

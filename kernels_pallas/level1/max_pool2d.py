"""level1/max_pool2d: 2x2 max pooling with stride 2 over NCHW images."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
2-D max pooling, 2x2 window, stride 2. Input x: float32 [2, 8, 64, 64]
([batch, channels, height, width]). Output: float32 [2, 8, 32, 32],
out[b, c, i, j] = max of x[b, c, 2i + di, 2j + dj] over di, dj in {0, 1}."""
ATOL = 1e-6
RTOL = 1e-6
B, C, H, W = 2, 8, 64, 64


def make_inputs(key):
  return _blocks.normals(key, ((B, C, H, W), 1.0))


def reference(x):
  b, c, h, w = x.shape
  return jnp.max(x.reshape(b, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def _max_pool2d_kernel(x_ref, o_ref):
  # The four window positions are four strided loads of the whole image.
  oh, ow = o_ref.shape
  out = None
  for di in range(2):
    for dj in range(2):
      v = x_ref[pl.ds(di, oh, stride=2), pl.ds(dj, ow, stride=2)]
      out = v if out is None else jnp.maximum(out, v)
  o_ref[...] = out


def solution(x):
  b, c, h, w = x.shape
  return pl.pallas_call(
      _max_pool2d_kernel,
      out_shape=jax.ShapeDtypeStruct((b, c, h // 2, w // 2), x.dtype),
      grid=(b, c),
      in_specs=[pl.BlockSpec((None, None, h, w), lambda i, j: (i, j, 0, 0))],
      out_specs=pl.BlockSpec((None, None, h // 2, w // 2),
                             lambda i, j: (i, j, 0, 0)),
  )(x)

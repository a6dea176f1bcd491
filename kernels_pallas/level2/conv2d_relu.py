"""level2/conv2d_relu: 3x3 convolution (NHWC) + bias + ReLU, one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
2-D convolution (cross-correlation), 3x3 kernel, stride 1, zero padding 1 on
every side, channels-last layout, then bias and ReLU. Inputs: x float32
[2, 16, 16, 32] ([batch, height, width, in_channels]), w float32
[3, 3, 32, 64] ([kh, kw, in_channels, out_channels]), bias float32 [64].
Output: float32 [2, 16, 16, 64], out[b, h, x, o] = max(bias[o] +
sum_{i, j, c} w[i, j, c, o] * in[b, h + i - 1, x + j - 1, c], 0), with
in = 0 outside the image."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, W, C_IN, C_OUT = 2, 16, 16, 32, 64


def make_inputs(key):
  return _blocks.normals(key, ((B, H, W, C_IN), 1.0),
                         ((3, 3, C_IN, C_OUT), _blocks.fan_in(9 * C_IN)),
                         ((C_OUT,), 0.5))


def reference(x, w, bias):
  y = jax.lax.conv_general_dilated(
      x, w, window_strides=(1, 1), padding=[(1, 1), (1, 1)],
      dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jnp.maximum(y + bias, 0.0)


def _conv2d_relu_kernel(xp_ref, w_ref, bias_ref, o_ref):
  # One program makes one output row h of one image: for each of the 9 taps
  # (i, j), padded row h + i shifted by j columns is a [W, C_in] matrix, and
  # its product with w[i, j] ([C_in, C_out]) adds into the [W, C_out] row.
  h = pl.program_id(1)
  width = o_ref.shape[0]
  acc = jnp.zeros(o_ref.shape, jnp.float32)
  for i in range(3):
    for j in range(3):
      patch = xp_ref[h + i, pl.ds(j, width), :]
      acc += jnp.dot(patch, w_ref[i, j], preferred_element_type=jnp.float32)
  o_ref[...] = jnp.maximum(acc + bias_ref[...][None, :], 0.0)


def solution(x, w, bias):
  b, h, wd, c_in = x.shape
  c_out = w.shape[3]
  xp = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  return pl.pallas_call(
      _conv2d_relu_kernel,
      out_shape=jax.ShapeDtypeStruct((b, h, wd, c_out), jnp.float32),
      grid=(b, h),
      in_specs=[pl.BlockSpec((None, h + 2, wd + 2, c_in),
                             lambda n, r: (n, 0, 0, 0)),
                pl.BlockSpec((3, 3, c_in, c_out), lambda n, r: (0, 0, 0, 0)),
                pl.BlockSpec((c_out,), lambda n, r: (0,))],
      out_specs=pl.BlockSpec((None, None, wd, c_out),
                             lambda n, r: (n, r, 0, 0)),
  )(xp, w, bias)

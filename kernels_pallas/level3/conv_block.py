"""level3/conv_block: ResNet basic block (two 3x3 convs, residual), NHWC."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Residual conv block (ResNet basic block without batch norm), channels-last.
Inputs: x float32 [2, 16, 16, 32] ([batch, height, width, channels]),
w1 float32 [3, 3, 32, 32], b1 float32 [32], w2 float32 [3, 3, 32, 32],
b2 float32 [32] (weights [kh, kw, in_channels, out_channels]). With
conv(z, w) a 3x3 cross-correlation, stride 1, zero padding 1:
h = max(conv(x, w1) + b1, 0); out = max(conv(h, w2) + b2 + x, 0).
Output: float32 [2, 16, 16, 32]."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, H, W, C = 2, 16, 16, 32


def make_inputs(key):
  w = ((3, 3, C, C), 1.5 * _blocks.fan_in(9 * C))
  return _blocks.normals(key, ((B, H, W, C), 1.0), w, ((C,), 0.3), w,
                         ((C,), 0.3))


def reference(x, w1, b1, w2, b2):
  conv = lambda z, w: jax.lax.conv_general_dilated(
      z, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NHWC", "HWIO",
                                                         "NHWC"))
  h = jnp.maximum(conv(x, w1) + b1, 0.0)
  return jnp.maximum(conv(h, w2) + b2 + x, 0.0)


def _conv_row(xp_ref, w_ref, width):
  # Output row h = program_id(1): 9 taps, each a [W, C_in] @ [C_in, C_out] dot.
  h = pl.program_id(1)
  acc = jnp.zeros((width, w_ref.shape[3]), jnp.float32)
  for i in range(3):
    for j in range(3):
      acc += jnp.dot(xp_ref[h + i, pl.ds(j, width), :], w_ref[i, j],
                     preferred_element_type=jnp.float32)
  return acc


def _conv_relu_kernel(xp_ref, w_ref, b_ref, o_ref):
  acc = _conv_row(xp_ref, w_ref, o_ref.shape[0])
  o_ref[...] = jnp.maximum(acc + b_ref[...][None, :], 0.0)


def _conv_residual_relu_kernel(hp_ref, w_ref, b_ref, x_ref, o_ref):
  acc = _conv_row(hp_ref, w_ref, o_ref.shape[0])
  o_ref[...] = jnp.maximum(acc + b_ref[...][None, :] + x_ref[...], 0.0)


def _conv(kernel, z, w, b, *extra):
  b_, h, wd, c_in = z.shape
  c_out = w.shape[3]
  zp = jnp.pad(z, ((0, 0), (1, 1), (1, 1), (0, 0)))
  row = pl.BlockSpec((None, None, wd, c_out), lambda n, r: (n, r, 0, 0))
  return pl.pallas_call(
      kernel,
      out_shape=jax.ShapeDtypeStruct((b_, h, wd, c_out), jnp.float32),
      grid=(b_, h),
      in_specs=[pl.BlockSpec((None, h + 2, wd + 2, c_in),
                             lambda n, r: (n, 0, 0, 0)),
                pl.BlockSpec((3, 3, c_in, c_out), lambda n, r: (0, 0, 0, 0)),
                pl.BlockSpec((c_out,), lambda n, r: (0,))]
               + [row] * len(extra),
      out_specs=row,
  )(zp, w, b, *extra)


def solution(x, w1, b1, w2, b2):
  # Two kernels: the second conv needs h zero-padded, i.e. all of h's rows
  # around each output row, which another program of the first kernel makes.
  h = _conv(_conv_relu_kernel, x, w1, b1)
  return _conv(_conv_residual_relu_kernel, h, w2, b2, x)

"""level1/conv1d: 1-D convolution over channels, kernel size 3, same padding."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
1-D convolution (cross-correlation, as in PyTorch's Conv1d), stride 1,
zero padding 1 on each side, no bias. Inputs: x float32 [4, 32, 256]
([batch, in_channels, length]), w float32 [64, 32, 3] ([out_channels,
in_channels, taps]). Output: float32 [4, 64, 256],
out[b, o, t] = sum_{c, k} w[o, c, k] * x[b, c, t + k - 1], where x is 0
outside 0 <= t + k - 1 < 256."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
B, C_IN, L, C_OUT, TAPS = 4, 32, 256, 64, 3
BLOCK_O = 32


def make_inputs(key):
  return _blocks.normals(key, ((B, C_IN, L), 1.0),
                         ((C_OUT, C_IN, TAPS), _blocks.fan_in(C_IN * TAPS)))


def reference(x, w):
  return jax.lax.conv_general_dilated(
      x, w, window_strides=(1,), padding=[(1, 1)],
      dimension_numbers=("NCH", "OIH", "NCH"))


def _conv1d_kernel(xp_ref, w_ref, o_ref):
  # xp_ref: one sample's zero-padded input [C_in, L + 2]; w_ref: [taps,
  # BLOCK_O, C_in]. Tap k is a matrix product of its weights with the input
  # shifted by k, so the convolution is `taps` dots, no im2col needed.
  length = o_ref.shape[1]
  acc = jnp.zeros(o_ref.shape, jnp.float32)
  for k in range(w_ref.shape[0]):
    acc += jnp.dot(w_ref[k], xp_ref[:, pl.ds(k, length)],
                   preferred_element_type=jnp.float32)
  o_ref[...] = acc


def solution(x, w):
  b, c_in, length = x.shape
  c_out, _, taps = w.shape
  # Padding and the weight transpose are data movement outside the kernel.
  xp = jnp.pad(x, ((0, 0), (0, 0), (1, 1)))
  w_taps = jnp.transpose(w, (2, 0, 1))  # [taps, C_out, C_in]
  return pl.pallas_call(
      _conv1d_kernel,
      out_shape=jax.ShapeDtypeStruct((b, c_out, length), jnp.float32),
      grid=(b, c_out // BLOCK_O),
      in_specs=[pl.BlockSpec((None, c_in, length + 2), lambda i, o: (i, 0, 0)),
                pl.BlockSpec((taps, BLOCK_O, c_in), lambda i, o: (0, o, 0))],
      out_specs=pl.BlockSpec((None, BLOCK_O, length), lambda i, o: (i, o, 0)),
  )(xp, w_taps)

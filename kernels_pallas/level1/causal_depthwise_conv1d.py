"""level1/causal_depthwise_conv1d: per-channel causal conv (Mamba-style)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Causal depthwise 1-D convolution with 4 taps. Inputs: x float32
[4, 256, 64] ([batch, time, channels]), w float32 [4, 64] ([taps,
channels]). Output: float32 [4, 256, 64], each channel filtered on its own:
out[b, t, c] = sum_{k=0..3} w[k, c] * x[b, t - 3 + k, c], where x is 0 for
negative times (w[3] weights the current step, w[0] the step 3 back)."""
ATOL = 1e-5
RTOL = 1e-5
B, T, C, TAPS = 4, 256, 64, 4
BLOCK_C = 32


def make_inputs(key):
  return _blocks.normals(key, ((B, T, C), 1.0), ((TAPS, C), 0.5))


def reference(x, w):
  taps = w.shape[0]
  xp = jnp.pad(x, ((0, 0), (taps - 1, 0), (0, 0)))
  return sum(w[k] * xp[:, k:k + x.shape[1]] for k in range(taps))


def _causal_dw_conv_kernel(xp_ref, w_ref, o_ref):
  # xp_ref: [T + 3, BLOCK_C], left-padded with 3 zero steps. Output step t
  # reads padded steps t .. t + 3, i.e. input steps t - 3 .. t.
  steps = o_ref.shape[0]
  acc = jnp.zeros(o_ref.shape, jnp.float32)
  for k in range(w_ref.shape[0]):
    acc += xp_ref[pl.ds(k, steps), :] * w_ref[k][None, :]
  o_ref[...] = acc


def solution(x, w):
  b, t, c = x.shape
  taps = w.shape[0]
  xp = jnp.pad(x, ((0, 0), (taps - 1, 0), (0, 0)))
  return pl.pallas_call(
      _causal_dw_conv_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(b, c // BLOCK_C),
      in_specs=[pl.BlockSpec((None, t + taps - 1, BLOCK_C),
                             lambda i, j: (i, 0, j)),
                pl.BlockSpec((taps, BLOCK_C), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((None, t, BLOCK_C), lambda i, j: (i, 0, j)),
  )(xp, w)

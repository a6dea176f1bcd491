"""level3/mlp_block: transformer MLP with residual, one fused kernel."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Transformer MLP block with residual. Inputs: x float32 [512, 128],
w1 float32 [128, 512], w2 float32 [512, 128]. Output: float32 [512, 128],
out = gelu(x @ w1) @ w2 + x, where gelu is the tanh approximation
gelu(h) = 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h**3)))."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, D, F = 512, 128, 512
BLOCK_M, BLOCK_F = 32, 64


def make_inputs(key):
  # Hidden pre-activations of spread ~1.5 reach GELU's curved region.
  return _blocks.normals(key, ((M, D), 1.0), ((D, F), 1.5 * _blocks.fan_in(D)),
                         ((F, D), _blocks.fan_in(F)))


def reference(x, w1, w2):
  h = x @ w1
  h = 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                * (h + 0.044715 * h**3)))
  return h @ w2 + x


def _mlp_kernel(x_ref, w1_ref, w2_ref, o_ref):
  # Walk the hidden axis F in BLOCK_F slices: each slice of the hidden
  # activation is made, activated and consumed by the second dot at once,
  # so the [BLOCK_M, F] hidden tile never exists in memory.
  x = x_ref[...]

  def body(f, acc):
    start = pl.multiple_of(f * BLOCK_F, BLOCK_F)
    h = jnp.dot(x, w1_ref[:, pl.ds(start, BLOCK_F)],
                preferred_element_type=jnp.float32)
    h = 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                  * (h + 0.044715 * h * h * h)))
    return acc + jnp.dot(h, w2_ref[pl.ds(start, BLOCK_F), :],
                         preferred_element_type=jnp.float32)

  # Start from the residual instead of zeros: the add comes for free.
  o_ref[...] = jax.lax.fori_loop(0, w1_ref.shape[1] // BLOCK_F, body, x)


def solution(x, w1, w2):
  m, d = x.shape
  f = w1.shape[1]
  return pl.pallas_call(
      _mlp_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)),
                pl.BlockSpec((d, f), lambda i: (0, 0)),
                pl.BlockSpec((f, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)),
  )(x, w1, w2)

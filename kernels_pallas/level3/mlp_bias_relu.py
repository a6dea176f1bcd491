"""level3/mlp_bias_relu: two-layer MLP with biases and ReLU, one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Two-layer MLP. Inputs: x float32 [512, 256], w1 float32 [256, 512],
b1 float32 [512], w2 float32 [512, 128], b2 float32 [128]. Output: float32
[512, 128], out = max(x @ w1 + b1, 0) @ w2 + b2."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, D, F, N = 512, 256, 512, 128
BLOCK_M, BLOCK_F = 32, 64


def make_inputs(key):
  return _blocks.normals(key, ((M, D), 1.0), ((D, F), _blocks.fan_in(D)),
                         ((F,), 0.5), ((F, N), 2.0 * _blocks.fan_in(F)),
                         ((N,), 0.5))


def reference(x, w1, b1, w2, b2):
  return jnp.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def _mlp_kernel(x_ref, w1_ref, b1_ref, w2_ref, b2_ref, o_ref):
  x = x_ref[...]

  def body(f, acc):
    start = pl.multiple_of(f * BLOCK_F, BLOCK_F)
    h = jnp.dot(x, w1_ref[:, pl.ds(start, BLOCK_F)],
                preferred_element_type=jnp.float32)
    h = jnp.maximum(h + b1_ref[pl.ds(start, BLOCK_F)][None, :], 0.0)
    return acc + jnp.dot(h, w2_ref[pl.ds(start, BLOCK_F), :],
                         preferred_element_type=jnp.float32)

  acc = jnp.broadcast_to(b2_ref[...][None, :], o_ref.shape)
  o_ref[...] = jax.lax.fori_loop(0, w1_ref.shape[1] // BLOCK_F, body, acc)


def solution(x, w1, b1, w2, b2):
  m, d = x.shape
  f, n = w2.shape
  full = lambda *shape: pl.BlockSpec(shape, lambda i: (0,) * len(shape))
  return pl.pallas_call(
      _mlp_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)), full(d, f),
                full(f), full(f, n), full(n)],
      out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
  )(x, w1, b1, w2, b2)

"""level2/swiglu: silu(x @ w_gate) * (x @ w_up), both products in one kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
SwiGLU gate. Inputs: x float32 [256, 512], w_gate float32 [512, 1024],
w_up float32 [512, 1024]. Output: float32 [256, 1024], with
g = x @ w_gate and u = x @ w_up: out = silu(g) * u, where
silu(g) = g / (1 + exp(-g))."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, D, F = 256, 512, 1024
BLOCK_M, BLOCK_F, BLOCK_K = 64, 64, 32


def make_inputs(key):
  w = ((D, F), _blocks.fan_in(D))
  return _blocks.normals(key, ((M, D), 1.0), w, w)


def reference(x, w_gate, w_up):
  g = x @ w_gate
  return g / (1.0 + jnp.exp(-g)) * (x @ w_up)


def _swiglu_kernel(x_ref, wg_ref, wu_ref, o_ref):
  # One pass over x feeds both products, so x is read once for two dots.
  def body(k, accs):
    gate, up = accs
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    x = x_ref[:, pl.ds(start, BLOCK_K)]
    gate += jnp.dot(x, wg_ref[pl.ds(start, BLOCK_K), :],
                    preferred_element_type=jnp.float32)
    up += jnp.dot(x, wu_ref[pl.ds(start, BLOCK_K), :],
                  preferred_element_type=jnp.float32)
    return gate, up

  zeros = jnp.zeros((BLOCK_M, BLOCK_F), jnp.float32)
  gate, up = jax.lax.fori_loop(0, x_ref.shape[1] // BLOCK_K, body,
                               (zeros, zeros))
  o_ref[...] = gate / (1.0 + jnp.exp(-gate)) * up


def solution(x, w_gate, w_up):
  m, d = x.shape
  f = w_gate.shape[1]
  w_spec = pl.BlockSpec((d, BLOCK_F), lambda i, j: (0, j))
  return pl.pallas_call(
      _swiglu_kernel,
      out_shape=jax.ShapeDtypeStruct((m, f), jnp.float32),
      grid=(m // BLOCK_M, f // BLOCK_F),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i, j: (i, 0)),
                w_spec, w_spec],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_F), lambda i, j: (i, j)),
  )(x, w_gate, w_up)

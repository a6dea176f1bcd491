"""level3/rmsnorm_gated_mlp_block: RMSNorm + SwiGLU MLP + residual."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Pre-norm gated MLP sublayer, as in Llama. Inputs: x float32 [512, 128],
norm_w float32 [128], w_gate float32 [128, 512], w_up float32 [128, 512],
w_down float32 [512, 128]. Output: float32 [512, 128], with
y = x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6) * norm_w:
out = x + (silu(y @ w_gate) * (y @ w_up)) @ w_down,
silu(g) = g / (1 + exp(-g))."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, D, F = 512, 128, 512
BLOCK_M, BLOCK_F = 32, 64


def make_inputs(key):
  k_x, k_s, k_w = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((M, D), 1.0))
  (s,) = _blocks.uniforms(k_s, ((M, 1), 0.25, 4.0))
  w_in = ((D, F), _blocks.fan_in(D))
  norm_w, w_gate, w_up, w_down = _blocks.normals(
      k_w, ((D,), 0.3), w_in, w_in, ((F, D), _blocks.fan_in(F)))
  return x * s, 1.0 + norm_w, w_gate, w_up, w_down


def reference(x, norm_w, w_gate, w_up, w_down):
  y = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * norm_w
  g = y @ w_gate
  return x + (g / (1.0 + jnp.exp(-g)) * (y @ w_up)) @ w_down


def _rmsnorm_gated_mlp_kernel(x_ref, nw_ref, wg_ref, wu_ref, wd_ref, o_ref):
  # Walk the hidden axis in BLOCK_F slices: each slice's gate and up
  # products are combined and consumed by the down projection at once.
  x = x_ref[...]
  inv_rms = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + 1e-6)
  y = x * inv_rms * nw_ref[...][None, :]

  def body(f, acc):
    start = pl.multiple_of(f * BLOCK_F, BLOCK_F)
    g = jnp.dot(y, wg_ref[:, pl.ds(start, BLOCK_F)],
                preferred_element_type=jnp.float32)
    u = jnp.dot(y, wu_ref[:, pl.ds(start, BLOCK_F)],
                preferred_element_type=jnp.float32)
    h = g / (1.0 + jnp.exp(-g)) * u
    return acc + jnp.dot(h, wd_ref[pl.ds(start, BLOCK_F), :],
                         preferred_element_type=jnp.float32)

  o_ref[...] = jax.lax.fori_loop(0, wg_ref.shape[1] // BLOCK_F, body, x)


def solution(x, norm_w, w_gate, w_up, w_down):
  m, d = x.shape
  f = w_gate.shape[1]
  w_spec = pl.BlockSpec((d, f), lambda i: (0, 0))
  return pl.pallas_call(
      _rmsnorm_gated_mlp_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)),
                pl.BlockSpec((d,), lambda i: (0,)), w_spec, w_spec,
                pl.BlockSpec((f, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)),
  )(x, norm_w, w_gate, w_up, w_down)

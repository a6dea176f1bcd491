# task: level2/add_layer_norm
# Source: adapted from jax/experimental/pallas/ops/gpu/layer_norm.py
# (layer_norm_forward_kernel; JAX authors, Apache-2.0): the residual add
# fused into the loads, two-pass mean/variance over column blocks.
from __future__ import annotations

import functools

import jax
from jax import lax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def add_layer_norm_kernel(x_ref, r_ref, weight_ref, bias_ref, o_ref, *,
                          eps: float, block_size: int):
  n_col = x_ref.shape[0]

  def load_h(i):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    x = plgpu.load(x_ref.at[col_idx], mask=mask, other=0.0)
    r = plgpu.load(r_ref.at[col_idx], mask=mask, other=0.0)
    return (x + r).astype(jnp.float32), col_idx, mask

  n_blocks = pl.cdiv(n_col, block_size)
  mean = lax.fori_loop(0, n_blocks, lambda i, acc: acc + load_h(i)[0],
                       jnp.zeros(block_size)).sum() / n_col

  def var_body(i, acc):
    h, _, mask = load_h(i)
    h = jnp.where(mask, h - mean, 0.)
    return acc + h * h

  var = lax.fori_loop(0, n_blocks, var_body, jnp.zeros(block_size)).sum()
  rstd = 1 / jnp.sqrt(var / n_col + eps)

  @pl.loop(0, n_blocks)
  def body(i):
    h, col_idx, mask = load_h(i)
    weight = plgpu.load(weight_ref.at[col_idx], mask=mask)
    bias = plgpu.load(bias_ref.at[col_idx], mask=mask)
    plgpu.store(o_ref.at[col_idx],
                ((h - mean) * rstd * weight + bias).astype(o_ref.dtype),
                mask=mask)


def kernel(x, residual, gamma, beta):
  n = x.shape[-1]
  block_size = min(max(pl.next_power_of_2(n), 128), 4096)
  method = pl.pallas_call(
      functools.partial(add_layer_norm_kernel, eps=1e-5,
                        block_size=block_size),
      compiler_params=plgpu.CompilerParams(
          num_warps=min(max(block_size // 256, 1), 8)),
      grid=(),
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
  )
  return jax.vmap(method, in_axes=(0, 0, None, None))(x, residual, gamma, beta)

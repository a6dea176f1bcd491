# task: level1/layer_norm
# Source: adapted from jax/experimental/pallas/ops/gpu/layer_norm.py
# (layer_norm_forward_kernel; JAX authors, Apache-2.0): one program per row,
# mean and variance in fori_loops over column blocks with masked loads,
# pl.loop for the normalised output, the Triton heuristics for block size
# and warps. Adapted only to return the normalised output (no residuals).
from __future__ import annotations

import functools

import jax
from jax import lax
import jax.numpy as jnp

from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def layer_norm_forward_kernel(
    x_ref, weight_ref, bias_ref,  # Input arrays
    o_ref,  # Output array
    *, eps: float, block_size: int):
  n_col = x_ref.shape[0]

  def mean_body(i, acc):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    a = plgpu.load(
        x_ref.at[col_idx], mask=mask, other=0.0, eviction_policy="evict_last"
    ).astype(jnp.float32)
    return acc + a

  mean = lax.fori_loop(
      0, pl.cdiv(n_col, block_size), mean_body,
      init_val=jnp.zeros(block_size)).sum()
  mean /= n_col

  def var_body(i, acc):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    a = plgpu.load(
        x_ref.at[col_idx], mask=mask, other=0.0, eviction_policy="evict_last"
    ).astype(jnp.float32)
    a = jnp.where(mask, a - mean, 0.)
    return acc + a * a

  var = lax.fori_loop(
      0, pl.cdiv(n_col, block_size), var_body,
      init_val=jnp.zeros(block_size)).sum()
  var /= n_col
  rstd = 1 / jnp.sqrt(var + eps)

  @pl.loop(0, pl.cdiv(n_col, block_size))
  def body(i):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    weight = plgpu.load(weight_ref.at[col_idx], mask=mask)
    bias = plgpu.load(bias_ref.at[col_idx], mask=mask)
    x = plgpu.load(
        x_ref.at[col_idx], mask=mask, other=0.0, eviction_policy="evict_first"
    ).astype(jnp.float32)
    out = (x - mean) * rstd * weight + bias
    plgpu.store(o_ref.at[col_idx], out.astype(o_ref.dtype), mask=mask)


def layer_norm(x, weight, bias, eps: float = 1e-5):
  n = x.shape[-1]
  # Triton heuristics: less than 64KB per feature, one fused kernel.
  max_fused_size = 65536 // x.dtype.itemsize
  block_size = min(max_fused_size, pl.next_power_of_2(n))
  block_size = min(max(block_size, 128), 4096)
  num_warps = min(max(block_size // 256, 1), 8)
  kernel = functools.partial(layer_norm_forward_kernel, eps=eps,
                             block_size=block_size)
  method = pl.pallas_call(
      kernel,
      compiler_params=plgpu.CompilerParams(num_warps=num_warps),
      grid=(),
      out_shape=jax.ShapeDtypeStruct(shape=(n,), dtype=x.dtype),
      name="ln_forward",
  )
  return jax.vmap(method, in_axes=(0, None, None))(x, weight, bias)


def kernel(x, gamma, beta):
  return layer_norm(x, gamma, beta)

# task: level1/rms_norm
# Source: adapted from jax/experimental/pallas/ops/gpu/rms_norm.py
# (rms_norm_forward_kernel; JAX authors, Apache-2.0). Adapted to the task:
# no bias, eps 1e-6, the output only.
from __future__ import annotations

import functools

import jax
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
import jax.numpy as jnp


def rms_norm_forward_kernel(x_ref, weight_ref, o_ref, *, eps: float,
                            block_size: int):
  n_col = x_ref.shape[0]

  def var_body(i, acc):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    a = plgpu.load(
        x_ref.at[col_idx], mask=mask, other=0.0, eviction_policy="evict_last"
    ).astype(jnp.float32)
    a = jnp.where(mask, a, 0.)
    return acc + a * a

  var = lax.fori_loop(
      0, pl.cdiv(n_col, block_size), var_body, init_val=jnp.zeros(block_size)
  ).sum()
  var /= n_col
  rstd = 1 / jnp.sqrt(var + eps)

  @pl.loop(0, pl.cdiv(n_col, block_size))
  def body(i):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    weight = plgpu.load(weight_ref.at[col_idx], mask=mask)
    x = plgpu.load(
        x_ref.at[col_idx], mask=mask, other=0.0, eviction_policy="evict_first"
    ).astype(jnp.float32)
    plgpu.store(o_ref.at[col_idx], (x * rstd * weight).astype(o_ref.dtype),
                mask=mask)


@functools.partial(jax.jit, static_argnames=["eps"])
def rms_norm(x, weight, eps: float = 1e-6):
  n = x.shape[-1]
  max_fused_size = 65536 // x.dtype.itemsize
  block_size = min(max_fused_size, pl.next_power_of_2(n))
  block_size = min(max(block_size, 128), 4096)
  num_warps = min(max(block_size // 256, 1), 8)
  kernel = functools.partial(rms_norm_forward_kernel, eps=eps,
                             block_size=block_size)
  method = pl.pallas_call(
      kernel,
      compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=3),
      grid=(),
      out_shape=jax.ShapeDtypeStruct(shape=(n,), dtype=x.dtype),
  )
  return jax.vmap(method, in_axes=(0, None))(x, weight)


def kernel(x, weight):
  return rms_norm(x, weight)

# task: level2/layer_norm_relu
# Source: the row-block layer norm of the Pallas docs pattern with an
# activation epilogue; the epsilon and block rows in a typing.NamedTuple
# with string annotations (`from __future__ import annotations`).
from __future__ import annotations

import typing

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


class Config(typing.NamedTuple):
  eps: float = 1e-5
  block_rows: int = 32


def _ln_relu_kernel(x_ref, g_ref, b_ref, o_ref, *, cfg: Config):
  x = x_ref[...]
  mean = jnp.mean(x, axis=-1, keepdims=True)
  centered = x - mean
  var = jnp.mean(centered * centered, axis=-1, keepdims=True)
  y = centered * jax.lax.rsqrt(var + cfg.eps) * g_ref[...] + b_ref[...]
  o_ref[...] = jnp.maximum(y, 0.0)


def kernel(x, gamma, beta, cfg: Config = Config()):
  import functools
  n, d = x.shape
  rows = pl.BlockSpec((cfg.block_rows, d), lambda i: (i, 0))
  vec = pl.BlockSpec((d,), lambda i: (0,))
  return pl.pallas_call(
      functools.partial(_ln_relu_kernel, cfg=cfg),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // cfg.block_rows,), in_specs=[rows, vec, vec], out_specs=rows,
  )(x, gamma, beta)

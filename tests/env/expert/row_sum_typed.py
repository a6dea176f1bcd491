# task: level1/row_sum
# Source: the Pallas docs' reduction over a row block ("Grids and
# BlockSpecs"; JAX authors, Apache-2.0) with the typing annotations common
# in upstream ops (jax.Array, typing.Callable) and `from __future__ import
# annotations`.
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _reduce_kernel(x_ref: jax.Array, o_ref: jax.Array, *,
                   combine: Callable[[jax.Array], jax.Array]) -> None:
  o_ref[...] = combine(x_ref[...])


def _row_sum(block: jax.Array) -> jax.Array:
  return jnp.sum(block, axis=1)


def kernel(x: jax.Array) -> jax.Array:
  import functools
  n, d = x.shape
  rows = 64
  return pl.pallas_call(
      functools.partial(_reduce_kernel, combine=_row_sum),
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // rows,),
      in_specs=[pl.BlockSpec((rows, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((rows,), lambda i: (i,)),
  )(x)

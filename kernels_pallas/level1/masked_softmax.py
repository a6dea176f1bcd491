"""level1/masked_softmax: row softmax over each row's valid prefix."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Length-masked softmax over the last axis. Inputs: x float32 [1024, 256],
lengths int32 [1024] with 1 <= lengths[i] <= 256. Output: float32
[1024, 256]: row i is a softmax over its first lengths[i] entries only,
out[i, j] = exp(x[i, j]) / sum_{k < lengths[i]} exp(x[i, k]) for
j < lengths[i], and out[i, j] = 0 for j >= lengths[i]."""
ATOL = 1e-6
RTOL = 1e-5
N, D = 1024, 256
BLOCK_N = 32


def make_inputs(key):
  k_x, k_len = jax.random.split(key)
  (x,) = _blocks.normals(k_x, ((N, D), 2.0))
  lengths = jax.random.randint(k_len, (N,), 1, D + 1, jnp.int32)
  return x, lengths


def reference(x, lengths):
  valid = jnp.arange(x.shape[1])[None, :] < lengths[:, None]
  s = jnp.where(valid, x, -jnp.inf)
  e = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
  return e / jnp.sum(e, axis=1, keepdims=True)


def _masked_softmax_kernel(x_ref, len_ref, o_ref):
  x = x_ref[...]
  cols = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
  valid = cols < len_ref[...][:, None]
  # Every row has at least one valid entry, so the max is finite and the
  # masked entries' exp(-inf) is exactly 0.
  s = jnp.where(valid, x, -jnp.inf)
  e = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)


def solution(x, lengths):
  n, d = x.shape
  row_spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _masked_softmax_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[row_spec, pl.BlockSpec((BLOCK_N,), lambda i: (i,))],
      out_specs=row_spec,
  )(x, lengths)

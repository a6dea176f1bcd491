# task: level1/gelu
# Source: common expert style: a decorator of one's own that casts a
# kernel's math to float32, kept transparent with @functools.wraps; the
# tanh-approximation GELU as in flax.linen / jax.nn.gelu(approximate=True).
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def in_float32(fn):
  @functools.wraps(fn)
  def wrapped(x):
    return fn(x.astype(jnp.float32)).astype(x.dtype)
  return wrapped


@in_float32
def _gelu(x):
  return 0.5 * x * (1.0 + jnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def _gelu_kernel(x_ref, o_ref):
  o_ref[...] = _gelu(x_ref[...])


def kernel(x):
  n, d = x.shape
  spec = pl.BlockSpec((64, d), lambda i: (i, 0))
  return pl.pallas_call(
      _gelu_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // 64,), in_specs=[spec], out_specs=spec)(x)

# task: level3/mlp_block
# Source: the Pallas matmul design note's fused-activation matmul
# (matmul_kernel with an `activation` argument, docs.jax.dev/en/latest/
# pallas/tpu/matmul.html; JAX authors, Apache-2.0), called twice: up
# projection with GELU, then down projection with the residual fused.
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def gelu_tanh(h):
  return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                   * (h + 0.044715 * h ** 3)))


def matmul_kernel(x_ref, y_ref, *rest, activation):
  *residual_ref, z_ref = rest
  acc = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
  acc = activation(acc)
  if residual_ref:
    acc = acc + residual_ref[0][...]
  z_ref[...] = acc.astype(z_ref.dtype)


def matmul(x, y, residual=None, *, activation=lambda a: a, bm=64, bn=128):
  m, k = x.shape
  _, n = y.shape
  in_specs = [pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
              pl.BlockSpec((k, bn), lambda i, j: (0, j))]
  args = (x, y)
  if residual is not None:
    in_specs.append(pl.BlockSpec((bm, bn), lambda i, j: (i, j)))
    args += (residual,)
  return pl.pallas_call(
      functools.partial(matmul_kernel, activation=activation),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      grid=(m // bm, n // bn), in_specs=in_specs,
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
  )(*args)


def kernel(x, w1, w2):
  h = matmul(x, w1, activation=gelu_tanh)
  return matmul(h, w2, residual=x)

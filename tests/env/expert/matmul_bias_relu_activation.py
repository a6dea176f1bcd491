# task: level2/matmul_bias_relu
# Source: the Pallas matmul design note's fused-activation matmul
# (docs.jax.dev/en/latest/pallas/tpu/matmul.html, matmul_kernel with an
# `activation` bound by functools.partial; JAX authors, Apache-2.0), with a
# bias and a K loop inside each program as GPU grids run in parallel.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, b_ref, z_ref, *, activation, block_k: int):
  def body(k, acc):
    ks = pl.ds(pl.multiple_of(k * block_k, block_k), block_k)
    return acc + jnp.dot(x_ref[:, ks], y_ref[ks, :],
                         preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, x_ref.shape[1] // block_k, body,
                          jnp.zeros(z_ref.shape, jnp.float32))
  z_ref[...] = activation(acc + b_ref[...][None, :]).astype(z_ref.dtype)


@functools.partial(jax.jit, static_argnames=["bm", "bn", "bk", "activation"])
def matmul(x, y, bias, *, bm=64, bn=64, bk=32, activation=jax.nn.relu):
  m, k = x.shape
  _, n = y.shape
  return pl.pallas_call(
      functools.partial(matmul_kernel, activation=activation, block_k=bk),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      grid=(m // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j)),
                pl.BlockSpec((bn,), lambda i, j: (j,))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
  )(x, y, bias)


def kernel(a, b, bias):
  return matmul(a, b, bias)

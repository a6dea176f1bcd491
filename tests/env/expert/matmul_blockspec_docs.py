# task: level1/matmul
# Source: the Pallas docs' blocked matmul ("Grids and BlockSpecs" and the
# matmul design note, docs.jax.dev/en/latest/pallas; JAX authors,
# Apache-2.0): a (m/bm, n/bn) grid, each program a [bm, K] x [K, bn] product.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, z_ref):
  z_ref[...] = jnp.dot(x_ref[...], y_ref[...],
                       preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=["bm", "bn"])
def matmul(x: jax.Array, y: jax.Array, *, bm: int = 64, bn: int = 128):
  m, k = x.shape
  _, n = y.shape
  return pl.pallas_call(
      matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
  )(x, y)


def kernel(a, b):
  return matmul(a, b)


if __name__ == "__main__":
  k1, k2 = jax.random.split(jax.random.key(0))
  a = jax.random.normal(k1, (512, 256))
  b = jax.random.normal(k2, (256, 1024))
  print(jnp.max(jnp.abs(kernel(a, b) - a @ b)))

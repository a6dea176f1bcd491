# task: level1/vector_add
# Source: the Pallas Quickstart's "hello world" (add_vectors_kernel,
# docs.jax.dev/en/latest/pallas/quickstart.html; JAX authors, Apache-2.0),
# blocked with a grid and BlockSpecs as in "Grids and BlockSpecs". The
# entry point's first argument is called `input`, as in torch-style code.
from functools import partial

import jax
from jax.experimental import pallas as pl
import jax.numpy as jnp
import numpy as np


def add_vectors_kernel(x_ref, y_ref, o_ref):
  x, y = x_ref[...], y_ref[...]
  o_ref[...] = x + y


@partial(jax.jit, static_argnames=["block"])
def add_vectors(x: jax.Array, y: jax.Array, block: int = 4096) -> jax.Array:
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(
      add_vectors_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(pl.cdiv(x.shape[0], block),),
      in_specs=[spec, spec],
      out_specs=spec,
  )(x, y)


def kernel(input, other):
  return add_vectors(input, other)


if __name__ == "__main__":
  x = jnp.arange(8192, dtype=jnp.float32)
  np.testing.assert_allclose(kernel(x, x), 2 * x)

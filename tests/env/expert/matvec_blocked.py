# task: level1/matvec
# Source: the Pallas docs' BlockSpec matmul pattern ("Grids and
# BlockSpecs"; JAX authors, Apache-2.0) specialised to a matrix-vector
# product: row blocks of A, the whole vector, a K loop inside the kernel.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS, BLOCK_K = 64, 256


def _matvec_kernel(a_ref, x_ref, o_ref):
  def body(k, acc):
    ks = pl.ds(pl.multiple_of(k * BLOCK_K, BLOCK_K), BLOCK_K)
    return acc + jnp.sum(a_ref[:, ks] * x_ref[ks][None, :], axis=1)

  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                                 jnp.zeros((BLOCK_ROWS,), jnp.float32))


def kernel(a, x):
  m, k = a.shape
  return pl.pallas_call(
      _matvec_kernel,
      out_shape=jax.ShapeDtypeStruct((m,), jnp.float32),
      grid=(m // BLOCK_ROWS,),
      in_specs=[pl.BlockSpec((BLOCK_ROWS, k), lambda i: (i, 0)),
                pl.BlockSpec((k,), lambda i: (0,))],
      out_specs=pl.BlockSpec((BLOCK_ROWS,), lambda i: (i,)),
  )(a, x)

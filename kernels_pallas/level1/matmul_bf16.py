"""level1/matmul_bf16: bfloat16 matrix product with float32 accumulation."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
bfloat16 matrix multiply. Inputs: a bfloat16 [512, 512], b bfloat16
[512, 512]. Output: bfloat16 [512, 512], out = a @ b, accumulated in
float32 and rounded to bfloat16 once at the end."""
ATOL = _blocks.BF16_ATOL
RTOL = _blocks.BF16_RTOL
M, K, N = 512, 512, 512
BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 64


def make_inputs(key):
  return _blocks.bf16(*_blocks.normals(key, ((M, K), 1.0),
                                       ((K, N), _blocks.fan_in(K))))


def reference(a, b):
  return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(jnp.bfloat16)


def _matmul_bf16_kernel(a_ref, b_ref, o_ref):
  # bf16 operands feed the tensor cores directly; the running sum stays in
  # float32 so 512 products do not lose bits to bf16 rounding.
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  acc = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)
  o_ref[...] = acc.astype(o_ref.dtype)


def solution(a, b):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _matmul_bf16_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b)

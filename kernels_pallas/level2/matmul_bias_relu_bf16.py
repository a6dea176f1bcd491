"""level2/matmul_bias_relu_bf16: bf16 linear layer with ReLU."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
bfloat16 linear layer with ReLU. Inputs: a bfloat16 [512, 512], b bfloat16
[512, 256], bias bfloat16 [256]. Output: bfloat16 [512, 256],
out = max(a @ b + bias[None, :], 0), with the product accumulated in
float32 and the result rounded to bfloat16 once."""
ATOL = _blocks.BF16_ATOL
RTOL = _blocks.BF16_RTOL
M, K, N = 512, 512, 256
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


def make_inputs(key):
  return _blocks.bf16(*_blocks.normals(
      key, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)), ((N,), 0.5)))


def reference(a, b, bias):
  h = jnp.dot(a, b, preferred_element_type=jnp.float32)
  return jnp.maximum(h + bias.astype(jnp.float32), 0.0).astype(jnp.bfloat16)


def _linear_relu_bf16_kernel(a_ref, b_ref, bias_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    return acc + jnp.dot(a_ref[:, pl.ds(start, BLOCK_K)],
                         b_ref[pl.ds(start, BLOCK_K), :],
                         preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                          jnp.zeros(o_ref.shape, jnp.float32))
  h = acc + bias_ref[...].astype(jnp.float32)[None, :]
  o_ref[...] = jnp.maximum(h, 0.0).astype(o_ref.dtype)


def solution(a, b, bias):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _linear_relu_bf16_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j)),
                pl.BlockSpec((BLOCK_N,), lambda i, j: (j,))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b, bias)

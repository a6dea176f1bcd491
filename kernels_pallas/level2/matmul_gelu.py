"""level2/matmul_gelu: gelu(a @ b), tanh approximation, fused."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Matrix multiply followed by GELU (tanh approximation, not the erf form).
Inputs: a float32 [256, 512], b float32 [512, 512]. Output: float32
[256, 512], with h = a @ b:
out = 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h**3)))."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 256, 512, 512
BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 64


def make_inputs(key):
  # Pre-activations of spread ~2 reach the curved part of GELU and its tails.
  return _blocks.normals(key, ((M, K), 1.0), ((K, N), 2.0 * _blocks.fan_in(K)))


def reference(a, b):
  h = a @ b
  return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                   * (h + 0.044715 * h**3)))


def _matmul_gelu_kernel(a_ref, b_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  h = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body,
                        jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32))
  inner = math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)
  o_ref[...] = 0.5 * h * (1.0 + jnp.tanh(inner))


def solution(a, b):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _matmul_gelu_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b)

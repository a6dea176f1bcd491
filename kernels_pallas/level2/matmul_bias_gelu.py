"""level2/matmul_bias_gelu: a @ b + bias, then tanh-form GELU, fused."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Linear layer with GELU (tanh form). Inputs: a float32 [256, 256], b float32
[256, 512], bias float32 [512]. Output: float32 [256, 512], with
h = a @ b + bias[None, :]: out = 0.5 * h * (1 + tanh(sqrt(2 / pi) *
(h + 0.044715 * h**3))) (the tanh approximation of GELU)."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 256, 256, 512
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


def make_inputs(key):
  # Pre-activations of spread ~1.5: the activation's curved part matters.
  return _blocks.normals(key, ((M, K), 1.0),
                         ((K, N), 1.5 * _blocks.fan_in(K)), ((N,), 0.5))


def reference(a, b, bias):
  h = a @ b + bias
  return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                * (h + 0.044715 * h**3)))


def _matmul_bias_gelu_kernel(a_ref, b_ref, bias_ref, o_ref):
  def body(k, acc):
    start = pl.multiple_of(k * BLOCK_K, BLOCK_K)
    a = a_ref[:, pl.ds(start, BLOCK_K)]
    b = b_ref[pl.ds(start, BLOCK_K), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
  acc = jax.lax.fori_loop(0, a_ref.shape[1] // BLOCK_K, body, acc)
  # Bias and activation run on the accumulator, before the only store.
  h = acc + bias_ref[...][None, :]
  o_ref[...] = 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                      * (h + 0.044715 * h * h * h)))


def solution(a, b, bias):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _matmul_bias_gelu_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M, n // BLOCK_N),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j)),
                pl.BlockSpec((BLOCK_N,), lambda i, j: (j,))],
      out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
  )(a, b, bias)

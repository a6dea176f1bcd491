# task: level2/matmul_bias_gelu
# Source: Triton-style tiled matmul (pl.program_id tiles, plgpu.dot,
# CompilerParams) with an epilogue fused after the K loop, as in the Triton
# matmul tutorial's "leaky_relu" epilogue; block sizes as module constants.
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
C = math.sqrt(2.0 / math.pi)


def gelu_tanh(h):
  return 0.5 * h * (1.0 + jnp.tanh(C * (h + 0.044715 * h * h * h)))


def matmul_bias_gelu_kernel(a_ref, b_ref, bias_ref, o_ref):
  pid_m, pid_n = pl.program_id(0), pl.program_id(1)
  rm = pl.ds(pid_m * BLOCK_M, BLOCK_M)
  rn = pl.ds(pid_n * BLOCK_N, BLOCK_N)

  def body(k, acc):
    rk = pl.ds(k * BLOCK_K, BLOCK_K)
    return acc + plgpu.dot(a_ref[rm, rk], b_ref[rk, rn])

  acc = jax.lax.fori_loop(0, pl.cdiv(a_ref.shape[1], BLOCK_K), body,
                          jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32))
  o_ref[rm, rn] = gelu_tanh(acc + bias_ref[rn][None, :]).astype(o_ref.dtype)


def kernel(a, b, bias):
  m, n = a.shape[0], b.shape[1]
  return pl.pallas_call(
      matmul_bias_gelu_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      grid=(pl.cdiv(m, BLOCK_M), pl.cdiv(n, BLOCK_N)),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=3),
  )(a, b, bias)

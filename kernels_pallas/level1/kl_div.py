"""level1/kl_div: per-sample KL divergence from log-probabilities."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Per-sample KL divergence KL(p || q), as PyTorch's kl_div(log_q, p) summed
over the last axis. Inputs: log_q float32 [1024, 512] (log-probabilities,
each row's exp sums to 1), p float32 [1024, 512] (probabilities, all > 0,
rows sum to 1). Output: float32 [1024],
out[i] = sum_j p[i, j] * (log(p[i, j]) - log_q[i, j])."""
ATOL = 1e-5
RTOL = 1e-4
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  # Inputs are made with jax.nn (plain jnp): only the kernel is timed.
  k_q, k_p, k_t = jax.random.split(key, 3)
  a, b = _blocks.normals(k_q, ((N, D), 1.5), ((N, D), 1.5))
  # p is q's logits plus per-row amounts of noise: KL values spread out.
  (t,) = _blocks.uniforms(k_t, ((N, 1), 0.1, 1.0))
  return jax.nn.log_softmax(a, axis=1), jax.nn.softmax(a + t * b, axis=1)


def reference(log_q, p):
  return jnp.sum(p * (jnp.log(p) - log_q), axis=1)


def _kl_div_kernel(log_q_ref, p_ref, o_ref):
  p = p_ref[...]
  o_ref[...] = jnp.sum(p * (jnp.log(p) - log_q_ref[...]), axis=1)


def solution(log_q, p):
  n, d = p.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _kl_div_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
      grid=(n // BLOCK_N,),
      in_specs=[spec, spec],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(log_q, p)

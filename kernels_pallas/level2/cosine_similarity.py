"""level2/cosine_similarity: normalize rows, then all-pairs dot products."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
All-pairs cosine similarity. Inputs: a float32 [512, 128], b float32
[256, 128]. Output: float32 [512, 256],
out[i, j] = (a[i] . b[j]) / (max(|a[i]|, 1e-8) * max(|b[j]|, 1e-8)), with
|v| the Euclidean norm of a row."""
ATOL = 5e-3
RTOL = _blocks.DOT_RTOL
M, N, D = 512, 256, 128
BLOCK_M = 64


def make_inputs(key):
  k_ab, k_s = jax.random.split(key)
  (base,) = _blocks.normals(k_ab, ((N, D), 1.0))
  a, noise = _blocks.normals(jax.random.fold_in(k_ab, 1), ((M, D), 1.0),
                             ((N, D), 1.0))
  sa, sb = _blocks.uniforms(k_s, ((M, 1), 0.5, 4.0), ((N, 1), 0.5, 4.0))
  # Half of a's rows are noisy copies of b's rows: similarities near 1 too.
  a = a.at[:N].set(base + 0.5 * noise)
  return a * sa, base * sb


def reference(a, b):
  na = jnp.maximum(jnp.linalg.norm(a, axis=1, keepdims=True), 1e-8)
  nb = jnp.maximum(jnp.linalg.norm(b, axis=1, keepdims=True), 1e-8)
  return (a / na) @ (b / nb).T


def _cosine_kernel(a_ref, b_ref, o_ref):
  a = a_ref[...]
  b = b_ref[...]
  a = a / jnp.maximum(jnp.sqrt(jnp.sum(a * a, axis=1, keepdims=True)), 1e-8)
  b = b / jnp.maximum(jnp.sqrt(jnp.sum(b * b, axis=1, keepdims=True)), 1e-8)
  o_ref[...] = jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.float32)


def solution(a, b):
  m, d = a.shape
  n = b.shape[0]
  return pl.pallas_call(
      _cosine_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, d), lambda i: (i, 0)),
                pl.BlockSpec((n, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
  )(a, b)

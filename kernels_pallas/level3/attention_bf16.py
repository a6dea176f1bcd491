"""level3/attention_bf16: bf16 flash attention with float32 statistics."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
bfloat16 scaled dot-product attention, not causal. Inputs: q, k, v bfloat16
[2, 4, 256, 64] ([batch, heads, seq, head_dim]). Output: bfloat16
[2, 4, 256, 64], out[b, h] = softmax(q[b, h] @ k[b, h].T / sqrt(64),
axis=-1) @ v[b, h], with scores, softmax and the output accumulated in
float32 and the result rounded to bfloat16 once."""
ATOL = _blocks.BF16_ATOL
RTOL = _blocks.BF16_RTOL
B, H, S, D = 2, 4, 256, 64
BLOCK_Q, BLOCK_K = 64, 64


def make_inputs(key):
  qk = ((B, H, S, D), math.sqrt(2.5))
  return _blocks.bf16(*_blocks.normals(key, qk, qk, ((B, H, S, D), 1.0)))


def reference(q, k, v):
  q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
  s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
  out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
  return out.astype(jnp.bfloat16)


def _attention_bf16_kernel(q_ref, k_ref, v_ref, o_ref):
  # bf16 operands go to the tensor cores; running max, denominator and the
  # output accumulator stay float32. p is rounded to bf16 only as a dot input.
  q = q_ref[...]
  scale = 1.0 / math.sqrt(q_ref.shape[-1])

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * scale
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    l = l * alpha + jnp.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p.astype(v.dtype), v,
                                         preferred_element_type=jnp.float32)
    return m_new, l, acc

  carry = (jnp.full((BLOCK_Q,), -jnp.inf, jnp.float32),
           jnp.zeros((BLOCK_Q,), jnp.float32),
           jnp.zeros((BLOCK_Q, q_ref.shape[-1]), jnp.float32))
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // BLOCK_K, body, carry)
  o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def solution(q, k, v):
  batch, heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, None, BLOCK_Q, dim),
                        lambda b, h, i: (b, h, i, 0))
  kv_spec = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
  return pl.pallas_call(
      _attention_bf16_kernel,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      grid=(batch, heads, seq // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)

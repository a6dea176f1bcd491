"""level3/transformer_layer: pre-norm transformer encoder layer, 4 kernels."""

import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Pre-norm transformer encoder layer (one sequence, not causal). Inputs:
x float32 [256, 128] ([seq, d_model]), ln1_g, ln1_b, ln2_g, ln2_b float32
[128], w_q, w_k, w_v, w_o float32 [128, 128], w1 float32 [128, 512],
w2 float32 [512, 128]. Output: float32 [256, 128].
ln(z, g, b) is layer norm over the last axis (biased var, eps 1e-5) times g
plus b; gelu is the tanh form. With 4 heads of size 32:
y = ln(x, ln1_g, ln1_b); q, k, v = y @ w_q, y @ w_k, y @ w_v; head n uses
columns n*32 .. n*32+31 of each;
a_n = softmax(q_n @ k_n.T / sqrt(32), axis=-1) @ v_n; a = [a_0 .. a_3]
concatenated along columns; h = x + a @ w_o;
out = h + gelu(ln(h, ln2_g, ln2_b) @ w1) @ w2."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
S, D, HEADS, F = 256, 128, 4, 512
BLOCK_S, BLOCK_Q, BLOCK_K, BLOCK_F = 64, 64, 64, 128


def make_inputs(key):
  k_x, k_ln, k_w = jax.random.split(key, 3)
  (x,) = _blocks.normals(k_x, ((S, D), 1.0))
  g1, b1, g2, b2 = _blocks.normals(k_ln, *[((D,), 0.3)] * 4)
  sq = ((D, D), _blocks.fan_in(D))
  w_q, w_k, w_v, w_o, w1, w2 = _blocks.normals(
      k_w, sq, sq, sq, sq, ((D, F), _blocks.fan_in(D)),
      ((F, D), _blocks.fan_in(F)))
  return x, 1.0 + g1, b1, 1.0 + g2, b2, w_q, w_k, w_v, w_o, w1, w2


def reference(x, ln1_g, ln1_b, ln2_g, ln2_b, w_q, w_k, w_v, w_o, w1, w2):
  def ln(z, g, b):
    mean = z.mean(-1, keepdims=True)
    var = ((z - mean) ** 2).mean(-1, keepdims=True)
    return (z - mean) / jnp.sqrt(var + 1e-5) * g + b

  s, d = x.shape
  y = ln(x, ln1_g, ln1_b)
  q, k, v = ((y @ w).reshape(s, HEADS, -1).transpose(1, 0, 2)
             for w in (w_q, w_k, w_v))
  p = jax.nn.softmax(q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1]), -1)
  a = (p @ v).transpose(1, 0, 2).reshape(s, d)
  h = x + a @ w_o
  u = ln(h, ln2_g, ln2_b) @ w1
  u = 0.5 * u * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                * (u + 0.044715 * u**3)))
  return h + u @ w2


def _layer_norm(z, g_ref, b_ref):
  centered = z - jnp.mean(z, axis=1, keepdims=True)
  var = jnp.mean(centered * centered, axis=1, keepdims=True)
  return (centered * jax.lax.rsqrt(var + 1e-5) * g_ref[...][None, :]
          + b_ref[...][None, :])


def _ln_qkv_kernel(x_ref, g_ref, b_ref, wq_ref, wk_ref, wv_ref,
                   q_ref, k_ref, v_ref):
  # One normalization feeds all three projections (three outputs).
  y = _layer_norm(x_ref[...], g_ref, b_ref)
  for w_ref, o_ref in ((wq_ref, q_ref), (wk_ref, k_ref), (wv_ref, v_ref)):
    o_ref[...] = jnp.dot(y, w_ref[...], preferred_element_type=jnp.float32)


def _attention_kernel(q_ref, k_ref, v_ref, o_ref):
  q = q_ref[...] * (1.0 / math.sqrt(q_ref.shape[-1]))

  def body(j, carry):
    m, l, acc = carry
    start = pl.multiple_of(j * BLOCK_K, BLOCK_K)
    k = k_ref[pl.ds(start, BLOCK_K), :]
    v = v_ref[pl.ds(start, BLOCK_K), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    l = l * alpha + jnp.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p, v,
                                         preferred_element_type=jnp.float32)
    return m_new, l, acc

  carry = (jnp.full((BLOCK_Q,), -jnp.inf, jnp.float32),
           jnp.zeros((BLOCK_Q,), jnp.float32),
           jnp.zeros((BLOCK_Q, q_ref.shape[-1]), jnp.float32))
  _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // BLOCK_K, body, carry)
  o_ref[...] = acc / l[:, None]


def _out_proj_kernel(a_ref, w_ref, x_ref, o_ref):
  o_ref[...] = x_ref[...] + jnp.dot(a_ref[...], w_ref[...],
                                    preferred_element_type=jnp.float32)


def _ln_mlp_kernel(h_ref, g_ref, b_ref, w1_ref, w2_ref, o_ref):
  h = h_ref[...]
  y = _layer_norm(h, g_ref, b_ref)

  def body(f, acc):
    start = pl.multiple_of(f * BLOCK_F, BLOCK_F)
    u = jnp.dot(y, w1_ref[:, pl.ds(start, BLOCK_F)],
                preferred_element_type=jnp.float32)
    u = 0.5 * u * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                  * (u + 0.044715 * u * u * u)))
    return acc + jnp.dot(u, w2_ref[pl.ds(start, BLOCK_F), :],
                         preferred_element_type=jnp.float32)

  o_ref[...] = jax.lax.fori_loop(0, w1_ref.shape[1] // BLOCK_F, body, h)


def _rows(kernel, out_cols, row_inputs, full_inputs):
  """pallas_call over BLOCK_S-row strips of the row inputs; the full
  inputs (weights, norm params) are whole blocks every program reads."""
  s = row_inputs[0].shape[0]
  full = lambda a: pl.BlockSpec(a.shape, lambda i: (0,) * a.ndim)
  return pl.pallas_call(
      kernel,
      out_shape=jax.ShapeDtypeStruct((s, out_cols), jnp.float32),
      grid=(s // BLOCK_S,),
      in_specs=[pl.BlockSpec((BLOCK_S, a.shape[1]), lambda i: (i, 0))
                for a in row_inputs] + [full(a) for a in full_inputs],
      out_specs=pl.BlockSpec((BLOCK_S, out_cols), lambda i: (i, 0)),
  )(*row_inputs, *full_inputs)


def solution(x, ln1_g, ln1_b, ln2_g, ln2_b, w_q, w_k, w_v, w_o, w1, w2):
  s, d = x.shape
  hd = d // HEADS
  row = pl.BlockSpec((BLOCK_S, d), lambda i: (i, 0))
  vec = pl.BlockSpec((d,), lambda i: (0,))
  mat = pl.BlockSpec((d, d), lambda i: (0, 0))
  qkv = pl.pallas_call(
      _ln_qkv_kernel,
      out_shape=[jax.ShapeDtypeStruct((s, d), jnp.float32)] * 3,
      grid=(s // BLOCK_S,),
      in_specs=[row, vec, vec, mat, mat, mat],
      out_specs=[row] * 3,
  )(x, ln1_g, ln1_b, w_q, w_k, w_v)
  # Split heads: [S, D] -> [HEADS, S, hd] (data movement only).
  q, k, v = (t.reshape(s, HEADS, hd).transpose(1, 0, 2) for t in qkv)
  q_spec = pl.BlockSpec((None, BLOCK_Q, hd), lambda n, i: (n, i, 0))
  kv_spec = pl.BlockSpec((None, s, hd), lambda n, i: (n, 0, 0))
  a = pl.pallas_call(
      _attention_kernel,
      out_shape=jax.ShapeDtypeStruct((HEADS, s, hd), jnp.float32),
      grid=(HEADS, s // BLOCK_Q),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
  )(q, k, v)
  a = a.transpose(1, 0, 2).reshape(s, d)
  # Row inputs first, then the whole-block ones (kernel argument order).
  h = pl.pallas_call(
      _out_proj_kernel,
      out_shape=jax.ShapeDtypeStruct((s, d), jnp.float32),
      grid=(s // BLOCK_S,),
      in_specs=[pl.BlockSpec((BLOCK_S, d), lambda i: (i, 0)),
                pl.BlockSpec((d, d), lambda i: (0, 0)),
                pl.BlockSpec((BLOCK_S, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_S, d), lambda i: (i, 0)),
  )(a, w_o, x)
  return _rows(_ln_mlp_kernel, d, [h], [ln2_g, ln2_b, w1, w2])

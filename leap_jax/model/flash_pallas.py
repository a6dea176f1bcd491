"""Flash attention as Pallas Triton kernels: causal, grouped heads, key padding.

Adapted from jax.experimental.pallas.ops.gpu.attention (forward and the
fused dK/dV + dQ backward of the Triton tutorial) with two additions the
policy needs: grouped-query heads (query head n reads key/value head
n // R through the BlockSpec index map, so keys are never repeated in
memory) and a key-validity mask (left-padded prompts). q arrives scaled.
Sequences are padded to a multiple of the blocks; head_dim must be a power
of two (attention.resolve falls back to the jnp form otherwise).

Runs compiled on GPU; `interpret=True` runs the same kernels on CPU, which
is how the tests check them here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
# Triton's dot (f32 accumulation); pl.dot is a deprecated alias of it.
from jax.experimental.pallas import triton as plgpu

NEG_INF = -1e30
BLOCK_FWD = 128
BLOCK_BWD = 32


def _compiler_params(num_warps: int, num_stages: int):
  return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)


def _masked_scores(q, k, valid_k, q_start, k_start, block_q, block_k):
  s = plgpu.dot(q, k.T)  # [block_q, block_k] f32
  q_pos = q_start + jnp.arange(block_q)
  k_pos = k_start + jnp.arange(block_k)
  mask = (k_pos[None, :] <= q_pos[:, None]) & (valid_k[None, :] != 0)
  return jnp.where(mask, s, NEG_INF), mask


def _forward_kernel(q_ref, k_ref, v_ref, valid_ref, o_ref, lse_ref, *,
                    block_q: int, block_k: int):
  i = pl.program_id(0)
  q = q_ref[...]
  h = q.shape[-1]

  def body(j, carry):
    acc, m, s_sum = carry
    k_slice = pl.ds(j * block_k, block_k)
    s, _ = _masked_scores(q, k_ref[k_slice, :], valid_ref[k_slice],
                          i * block_q, j * block_k, block_q, block_k)
    m_new = jnp.maximum(m, jnp.max(s, axis=-1))
    correction = jnp.exp(m - m_new)
    p = jnp.exp(s - m_new[:, None])
    s_sum = s_sum * correction + jnp.sum(p, axis=-1)
    v = v_ref[k_slice, :]
    acc = acc * correction[:, None] + plgpu.dot(p.astype(v.dtype), v)
    return acc, m_new, s_sum

  init = (jnp.zeros((block_q, h), jnp.float32),
          jnp.full((block_q,), NEG_INF, jnp.float32),
          jnp.zeros((block_q,), jnp.float32))
  # Causal: key blocks past this query block's last position are skipped.
  upper = jax.lax.div(block_q * (i + 1) + block_k - 1, block_k)
  acc, m, s_sum = jax.lax.fori_loop(0, upper, body, init)
  o_ref[...] = (acc / s_sum[:, None]).astype(o_ref.dtype)
  lse_ref[...] = m + jnp.log(s_sum)


def _forward(q_BLNH, k_BSKH, v_BSKH, valid_BS, group: int, interpret: bool):
  b, l, n, h = q_BLNH.shape
  block = min(BLOCK_FWD, l)
  kernel = functools.partial(_forward_kernel, block_q=block, block_k=block)
  kv_spec = pl.BlockSpec((None, l, None, h),
                         lambda i, bi, ni: (bi, 0, ni // group, 0))
  q_spec = pl.BlockSpec((None, block, None, h),
                        lambda i, bi, ni: (bi, i, ni, 0))
  return pl.pallas_call(
      kernel, grid=(l // block, b, n),
      in_specs=[q_spec, kv_spec, kv_spec,
                pl.BlockSpec((None, l), lambda i, bi, ni: (bi, 0))],
      out_specs=[q_spec,
                 pl.BlockSpec((None, None, block),
                              lambda i, bi, ni: (bi, ni, i))],
      out_shape=[jax.ShapeDtypeStruct(q_BLNH.shape, q_BLNH.dtype),
                 jax.ShapeDtypeStruct((b, n, l), jnp.float32)],
      compiler_params=None if interpret else _compiler_params(
          4 if h <= 64 else 8, 2),
      interpret=interpret, name='leap_flash_forward',
  )(q_BLNH, k_BSKH, v_BSKH, valid_BS)


def _backward_kernel(q_ref, k_ref, v_ref, valid_ref, do_ref, lse_ref,
                     delta_ref, dq_ref, dk_ref, dv_ref, *, block: int):
  l, h = q_ref.shape
  j = pl.program_id(2)
  # dK, dV of key block j: every query block at or after it.
  k_slice = pl.ds(j * block, block)
  k, v, valid_k = k_ref[k_slice, :], v_ref[k_slice, :], valid_ref[k_slice]

  def dkdv_step(i, carry):
    dk, dv = carry
    q_slice = pl.ds(i * block, block)
    q, do = q_ref[q_slice, :], do_ref[q_slice, :]
    s, mask = _masked_scores(q, k, valid_k, i * block, j * block, block,
                             block)
    p = jnp.where(mask, jnp.exp(s - lse_ref[q_slice][:, None]), 0.0)
    dv = dv + plgpu.dot(p.astype(do.dtype).T, do)
    dp = plgpu.dot(do, v.T) - delta_ref[q_slice][:, None]
    dk = dk + plgpu.dot((p * dp).astype(q.dtype).T, q)
    return dk, dv

  zeros = jnp.zeros((block, h), jnp.float32)
  dk, dv = jax.lax.fori_loop(j, l // block, dkdv_step, (zeros, zeros))
  dk_ref[...] = dk.astype(dk_ref.dtype)
  dv_ref[...] = dv.astype(dv_ref.dtype)

  # dQ of query block j: every key block up to it.
  q_slice = pl.ds(j * block, block)
  q, do = q_ref[q_slice, :], do_ref[q_slice, :]
  lse, delta = lse_ref[q_slice], delta_ref[q_slice]

  def dq_step(i, dq):
    k_slice = pl.ds(i * block, block)
    k = k_ref[k_slice, :]
    s, mask = _masked_scores(q, k, valid_ref[k_slice], j * block, i * block,
                             block, block)
    p = jnp.where(mask, jnp.exp(s - lse[:, None]), 0.0)
    dp = plgpu.dot(do, v_ref[k_slice, :].T) - delta[:, None]
    return dq + plgpu.dot((p * dp).astype(k.dtype), k)

  dq = jax.lax.fori_loop(0, j + 1, dq_step, jnp.zeros((block, h), jnp.float32))
  dq_ref[...] = dq.astype(dq_ref.dtype)


def _backward(q_BLNH, k_BSKH, v_BSKH, valid_BS, out_BLNH, lse_BNL, do_BLNH,
              group: int, interpret: bool):
  b, l, n, h = q_BLNH.shape
  block = min(BLOCK_BWD, l)
  delta_BNL = jnp.einsum('blnh,blnh->bnl', out_BLNH.astype(jnp.float32),
                         do_BLNH.astype(jnp.float32))
  seq = lambda bi, ni, _: (bi, 0, ni, 0)
  kv_seq = lambda bi, ni, _: (bi, 0, ni // group, 0)
  row = lambda bi, ni, _: (bi, ni, 0)
  per_block = lambda bi, ni, j: (bi, j, ni, 0)
  out_block = pl.BlockSpec((None, block, None, h), per_block)
  # dK, dV come out per query head and are summed over each group below.
  dq, dk_BLNH, dv_BLNH = pl.pallas_call(
      functools.partial(_backward_kernel, block=block),
      grid=(b, n, l // block),
      in_specs=[pl.BlockSpec((None, l, None, h), seq),
                pl.BlockSpec((None, l, None, h), kv_seq),
                pl.BlockSpec((None, l, None, h), kv_seq),
                pl.BlockSpec((None, l), lambda bi, ni, _: (bi, 0)),
                pl.BlockSpec((None, l, None, h), seq),
                pl.BlockSpec((None, None, l), row),
                pl.BlockSpec((None, None, l), row)],
      out_specs=[out_block, out_block, out_block],
      out_shape=[jax.ShapeDtypeStruct(q_BLNH.shape, q_BLNH.dtype),
                 jax.ShapeDtypeStruct(q_BLNH.shape, jnp.float32),
                 jax.ShapeDtypeStruct(q_BLNH.shape, jnp.float32)],
      compiler_params=None if interpret else _compiler_params(4, 2),
      interpret=interpret, name='leap_flash_backward',
  )(q_BLNH, k_BSKH, v_BSKH, valid_BS, do_BLNH, lse_BNL, delta_BNL)
  kv = n // group
  dk = dk_BLNH.reshape(b, l, kv, group, h).sum(3).astype(k_BSKH.dtype)
  dv = dv_BLNH.reshape(b, l, kv, group, h).sum(3).astype(v_BSKH.dtype)
  return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _flash(q_BLNH, k_BSKH, v_BSKH, valid_BS, group, interpret):
  return _forward(q_BLNH, k_BSKH, v_BSKH, valid_BS, group, interpret)[0]


def _flash_fwd(q_BLNH, k_BSKH, v_BSKH, valid_BS, group, interpret):
  out, lse = _forward(q_BLNH, k_BSKH, v_BSKH, valid_BS, group, interpret)
  return out, (q_BLNH, k_BSKH, v_BSKH, valid_BS, out, lse)


def _flash_bwd(group, interpret, residuals, do_BLNH):
  q, k, v, valid, out, lse = residuals
  dq, dk, dv = _backward(q, k, v, valid, out, lse, do_BLNH, group, interpret)
  return dq, dk, dv, None


_flash.defvjp(_flash_fwd, _flash_bwd)


def attention(q_BLKRH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array,
              valid_BS: jax.Array | None = None,
              interpret: bool | None = None) -> jax.Array:
  """Causal flash attention [B, L, K, R, H] (see the module docstring).

  interpret: None runs compiled on GPU and interpreted elsewhere.
  """
  if interpret is None:
    interpret = jax.default_backend() != 'gpu'
  b, l, kv, r, h = q_BLKRH.shape
  if h & (h - 1):
    raise ValueError(f'the Pallas attention needs a power-of-two head_dim, '
                     f'got {h}')
  step = max(BLOCK_FWD, BLOCK_BWD) if l > BLOCK_FWD else (
      1 << (l - 1).bit_length())
  padded = -(-l // step) * step
  pad = padded - l
  valid = (jnp.ones((b, l), jnp.int32) if valid_BS is None
           else valid_BS.astype(jnp.int32))
  q = q_BLKRH.reshape(b, l, kv * r, h)
  k, v = k_BSKH, v_BSKH
  if pad:
    widths = ((0, 0), (0, pad), (0, 0), (0, 0))
    q, k, v = (jnp.pad(x, widths) for x in (q, k, v))
    valid = jnp.pad(valid, ((0, 0), (0, pad)))
  out = _flash(q, k, v, valid, r, interpret)
  return out[:, :l].reshape(b, l, kv, r, h)

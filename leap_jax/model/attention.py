"""Causal self-attention over a whole sequence (training and prefill).

Four implementations behind one call, `causal(q, k, v, valid, impl)`:

  dot      scores [B, K, R, L, S] materialised, masked softmax: the
           reference every other one is tested against; fine for short L.
  chunked  blockwise online softmax (flash attention in jnp): query blocks
           of `block` tokens against key blocks up to the diagonal, with a
           custom VJP that recomputes each block's probabilities from the
           saved log-sum-exp, so neither pass keeps an [L, S] array.
  cudnn    jax.nn.dot_product_attention(implementation='cudnn'): GPUs,
           16-bit inputs, no key padding (training; the trainer's rows are
           right-padded, which causal attention never reads).
  pallas   flash_pallas.attention: a Triton kernel (forward and backward)
           with grouped heads and key padding (GPU prefill).

`auto` (the config default) picks chunked on CPU/TPU and cudnn or pallas
on GPU, so the same config trains anywhere. q is already scaled by
head_dim**-0.5; GQA keeps K key/value heads with R query heads each (HF's
repeat_kv order).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

IMPLEMENTATIONS = ('auto', 'dot', 'chunked', 'cudnn', 'pallas')
NEG_INF = -1e30  # finite: a fully masked (padding) row stays NaN-free
DEFAULT_BLOCK = 512


def check_impl(impl: str) -> None:
  if impl not in IMPLEMENTATIONS:
    raise ValueError(f'attention must be one of {IMPLEMENTATIONS}, got '
                     f'{impl!r}')


def resolve(impl: str, dtype, head_dim: int, padded: bool,
            platform: str | None = None) -> str:
  """The implementation `auto` stands for on this platform and input."""
  check_impl(impl)
  if impl != 'auto':
    return impl
  platform = platform or jax.default_backend()
  if platform != 'gpu':
    return 'chunked'
  if not padded and jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and (
      head_dim % 8 == 0 and head_dim <= 256):
    return 'cudnn'
  return 'pallas' if head_dim & (head_dim - 1) == 0 else 'chunked'


def causal(q_BLKRH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array,
           valid_BS: jax.Array | None = None, impl: str = 'auto',
           block: int = DEFAULT_BLOCK) -> jax.Array:
  """softmax(q k^T, causal and key-padding masked) v: [B, L, K, R, H].

  L == S (a whole sequence attends to itself). valid_BS False marks
  padding keys (None: all valid).
  """
  b, l, kv, r, h = q_BLKRH.shape
  if k_BSKH.shape[1] != l:
    raise ValueError(f'causal attention needs as many keys as queries, got '
                     f'{k_BSKH.shape[1]} and {l}')
  impl = resolve(impl, q_BLKRH.dtype, h, valid_BS is not None)
  if impl == 'dot':
    mask_BLS = jnp.tril(jnp.ones((l, l), bool))[None]
    if valid_BS is not None:
      mask_BLS = mask_BLS & valid_BS[:, None, :]
    return dot(q_BLKRH, k_BSKH, v_BSKH, mask_BLS)
  if impl == 'chunked':
    if valid_BS is None:
      valid_BS = jnp.ones((b, l), bool)
    return chunked(q_BLKRH, k_BSKH, v_BSKH, valid_BS, block)
  if impl == 'cudnn':
    if valid_BS is not None:
      raise ValueError('attention=cudnn has no key padding mask; use '
                       'pallas or chunked for left-padded prompts')
    return cudnn(q_BLKRH, k_BSKH, v_BSKH)
  from leap_jax.model import flash_pallas  # pylint: disable=g-import-not-at-top
  return flash_pallas.attention(q_BLKRH, k_BSKH, v_BSKH, valid_BS)


def dot(q_BLKRH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array,
        mask_BLS: jax.Array) -> jax.Array:
  """Grouped-query softmax attention with the whole score matrix."""
  s_BKRLS = jnp.einsum('blkrh,bskh->bkrls', q_BLKRH, k_BSKH,
                       preferred_element_type=jnp.float32)
  s_BKRLS = jnp.where(mask_BLS[:, None, None], s_BKRLS, NEG_INF)
  p_BKRLS = jax.nn.softmax(s_BKRLS, axis=-1).astype(v_BSKH.dtype)
  return jnp.einsum('bkrls,bskh->blkrh', p_BKRLS, v_BSKH)


def cudnn(q_BLKRH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array,
          implementation: str | None = 'cudnn') -> jax.Array:
  """jax.nn.dot_product_attention (causal, scale 1: q is pre-scaled).

  `implementation=None` lets jax choose (XLA on CPU): the tests' check of
  the layout on hosts without cuDNN.
  """
  b, l, kv, r, h = q_BLKRH.shape
  out_BLNH = jax.nn.dot_product_attention(
      q_BLKRH.reshape(b, l, kv * r, h), k_BSKH, v_BSKH, scale=1.0,
      is_causal=True, implementation=implementation)
  return out_BLNH.reshape(b, l, kv, r, h)


# --- chunked: flash attention in jnp -----------------------------------------


def _blocks(x, n: int, block: int):
  """[B, n * block, ...] -> [n, B, block, ...]."""
  return jnp.moveaxis(x.reshape(x.shape[0], n, block, *x.shape[2:]), 1, 0)


def _unblocks(x):
  """[n, B, block, ...] -> [B, n * block, ...]."""
  x = jnp.moveaxis(x, 0, 1)
  return x.reshape(x.shape[0], -1, *x.shape[3:])


def _pad_to(x, length: int, value=0):
  pad = length - x.shape[1]
  if not pad:
    return x
  widths = [(0, 0)] * x.ndim
  widths[1] = (0, pad)
  return jnp.pad(x, widths, constant_values=value)


def _block_scores(q_i, k_j, valid_j, i, j, block: int):
  """Masked f32 scores [B, K, R, bq, bk] of query block i, key block j."""
  s = jnp.einsum('bqkrh,bskh->bkrqs', q_i, k_j,
                 preferred_element_type=jnp.float32)
  q_pos = i * block + jnp.arange(block)
  k_pos = j * block + jnp.arange(block)
  mask = (k_pos[None, :] <= q_pos[:, None])[None] & valid_j[:, None, :]
  mask = mask[:, None, None]
  return jnp.where(mask, s, NEG_INF), mask


def chunked(q_BLKRH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array,
            valid_BS: jax.Array, block: int = DEFAULT_BLOCK) -> jax.Array:
  """Causal attention in blocks of `block` tokens (see module docstring)."""
  l = q_BLKRH.shape[1]
  block = min(block, l)
  padded = -(-l // block) * block
  out = _chunked(_pad_to(q_BLKRH, padded), _pad_to(k_BSKH, padded),
                 _pad_to(v_BSKH, padded), _pad_to(valid_BS, padded, False),
                 block)
  return out[:, :l]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _chunked(q, k, v, valid, block):
  return _chunked_fwd(q, k, v, valid, block)[0]


def _chunked_fwd(q, k, v, valid, block):
  b, l, kv, r, h = q.shape
  n = l // block
  qb, kb, vb, validb = (_blocks(x, n, block) for x in (q, k, v, valid))

  def q_block(i):
    q_i = qb[i]

    def kv_step(j, carry):
      m, s_sum, acc = carry
      s, _ = _block_scores(q_i, kb[j], validb[j], i, j, block)
      m_new = jnp.maximum(m, jnp.max(s, -1))
      p = jnp.exp(s - m_new[..., None])
      correction = jnp.exp(m - m_new)
      s_sum = s_sum * correction + jnp.sum(p, -1)
      acc = acc * correction[..., None] + jnp.einsum(
          'bkrqs,bskh->bkrqh', p.astype(v.dtype), vb[j],
          preferred_element_type=jnp.float32)
      return m_new, s_sum, acc

    init = (jnp.full((b, kv, r, block), NEG_INF, jnp.float32),
            jnp.zeros((b, kv, r, block), jnp.float32),
            jnp.zeros((b, kv, r, block, h), jnp.float32))
    # Causal: key blocks past the diagonal are never read.
    m, s_sum, acc = jax.lax.fori_loop(0, i + 1, kv_step, init)
    out = (acc / s_sum[..., None]).astype(q.dtype)
    return jnp.einsum('bkrqh->bqkrh', out), m + jnp.log(s_sum)

  out, lse = jax.lax.map(q_block, jnp.arange(n))
  out = _unblocks(out)
  return out, (q, k, v, valid, out, lse)


def _chunked_bwd(block, residuals, d_out):
  q, k, v, valid, out, lse = residuals
  b, l, kv, r, h = q.shape
  n = l // block
  # D = rowsum(dO * O): the softmax Jacobian's diagonal term.
  delta = jnp.einsum('bqkrh,bqkrh->bkrq', d_out.astype(jnp.float32),
                     out.astype(jnp.float32))
  delta_b = jnp.moveaxis(delta.reshape(b, kv, r, n, block), 3, 0)
  qb, kb, vb, validb, dob = (_blocks(x, n, block)
                             for x in (q, k, v, valid, d_out))

  def k_block(dq, j):
    k_j, v_j = kb[j], vb[j]

    def q_step(i, carry):
      dk_j, dv_j, dq = carry
      q_i, do_i = qb[i], dob[i]
      s, mask = _block_scores(q_i, k_j, validb[j], i, j, block)
      p = jnp.where(mask, jnp.exp(s - lse[i][..., None]), 0.0)
      dv_j = dv_j + jnp.einsum('bkrqs,bqkrh->bskh', p.astype(do_i.dtype),
                               do_i, preferred_element_type=jnp.float32)
      dp = jnp.einsum('bqkrh,bskh->bkrqs', do_i, v_j,
                      preferred_element_type=jnp.float32)
      ds = p * (dp - delta_b[i][..., None])
      dk_j = dk_j + jnp.einsum('bkrqs,bqkrh->bskh', ds.astype(q_i.dtype), q_i,
                               preferred_element_type=jnp.float32)
      dq_i = jnp.einsum('bkrqs,bskh->bqkrh', ds.astype(k_j.dtype), k_j,
                        preferred_element_type=jnp.float32)
      return dk_j, dv_j, dq.at[i].add(dq_i)

    zeros = jnp.zeros((b, block, kv, h), jnp.float32)
    # Causal: only query blocks at or below the diagonal read key block j.
    dk_j, dv_j, dq = jax.lax.fori_loop(j, n, q_step, (zeros, zeros, dq))
    return dq, (dk_j, dv_j)

  dq = jnp.zeros((n, b, block, kv, r, h), jnp.float32)
  dq, (dk, dv) = jax.lax.scan(k_block, dq, jnp.arange(n))
  return (_unblocks(dq).astype(q.dtype), _unblocks(dk).astype(k.dtype),
          _unblocks(dv).astype(v.dtype), None)


_chunked.defvjp(_chunked_fwd, _chunked_bwd)

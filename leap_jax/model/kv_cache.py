"""Attention cores: how a layer's queries see keys, with or without a cache.

`Causal` serves training, parity checks and prefill (where it can record
the prompt's keys/values); it attends with attention.causal, whose
implementation the config picks (no [L, L] scores but with `dot`).
`SharedPrefix` serves decoding G samples per prompt: the prompt's cache is
kept once per prompt and read by all its samples (G times less cache
traffic than repeating it), while each sample's own tokens go into a
per-sample buffer updated in place.

Caches are one array per layer (slicing a stacked [layers, ...] array costs
a copy per layer per step on XLA:CPU), kv-head-major, keys stored
transposed ([B, K, H, S]) and values not ([B, K, S, H]): both attention
matmuls then read their right operand in the layout XLA:CPU's dot wants
(the transposed key layout made the score matmul ~2x faster in the decode
loop). `cache_bytes` says what the caches of a sampler call take.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from leap_jax.model import attention, cpu_decode
from leap_jax.model.attention import NEG_INF
from leap_jax.model.config import ModelConfig

Layers = tuple[jax.Array, ...]


def _group(q_BLNH: jax.Array, num_kv_heads: int) -> jax.Array:
  """[B, L, N, H] -> [B, L, K, R, H]: HF's repeat_kv order (kv-head major)."""
  b, l, n, h = q_BLNH.shape
  return q_BLNH.reshape(b, l, num_kv_heads, n // num_kv_heads, h)


@struct.dataclass
class Causal:
  """Causal self-attention over the given tokens.

  valid_BL: False at padding keys (None: all valid).
  record: static; if set, each layer's keys ([B, K, H, L]) and values
  ([B, K, L, H]) are appended to ks/vs.
  impl, block: static; attention.causal's implementation and block size.
  """
  valid_BL: jax.Array | None = None
  ks: Layers = ()
  vs: Layers = ()
  record: bool = struct.field(pytree_node=False, default=False)
  impl: str = struct.field(pytree_node=False, default='auto')
  block: int = struct.field(pytree_node=False,
                            default=attention.DEFAULT_BLOCK)

  def attend(self, layer: int, q_BLNH: jax.Array, k_BLKH: jax.Array,
             v_BLKH: jax.Array) -> tuple[jax.Array, 'Causal']:
    del layer  # layers attend in order; recording appends
    b, l, n, h = q_BLNH.shape
    out_BLKRH = attention.causal(_group(q_BLNH, k_BLKH.shape[2]), k_BLKH,
                                 v_BLKH, self.valid_BL, self.impl, self.block)
    out_BLNH = out_BLKRH.reshape(b, l, n, h)
    if not self.record:
      return out_BLNH, self
    return out_BLNH, self.replace(ks=self.ks + (k_BLKH.transpose(0, 2, 3, 1),),
                                  vs=self.vs + (v_BLKH.transpose(0, 2, 1, 3),))


@dataclasses.dataclass(frozen=True)
class CacheBytes:
  """What a sampler call's KV caches take, in bytes (all devices)."""
  prompt: int  # prompts x prompt length, once per prompt
  generated: int  # prompts x samples x new-token slots
  per_device: int  # both, over the devices the rows are split across

  @property
  def total(self) -> int:
    return self.prompt + self.generated

  def describe(self) -> str:
    gb = lambda n: f'{n / 1e9:.3g} GB'
    return (f'KV cache {gb(self.total)} (prompts {gb(self.prompt)}, '
            f'samples {gb(self.generated)}), {gb(self.per_device)} per device')


def cache_bytes(cfg: ModelConfig, prompts: int, samples: int,
                prompt_len: int, new_tokens: int, devices: int = 1
                ) -> CacheBytes:
  """Cache bytes of `prompts` prompts of `prompt_len` tokens with `samples`
  samples of `new_tokens` slots each (keys and values, every layer), as
  Sampler.generate allocates them; rows split over `devices` devices."""
  per_token = (2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim *
               np.dtype(cfg.dtype).itemsize)
  prompt = prompts * prompt_len * per_token
  generated = prompts * samples * new_tokens * per_token
  return CacheBytes(prompt, generated, -(-(prompt + generated) // devices))


@struct.dataclass
class SharedPrefix:
  """One-token decode step of G samples per prompt.

  Two batch sizes meet here: the prompt caches' B counts prompts, the
  queries' and generated caches' B counts rows, prompt-major (row
  p * G + g is sample g of prompt p).
  prompt_ks/vs: per layer [B, K, H, S] / [B, K, S, H], the prompts' cache,
  shared by their G samples; prompt_valid_BS is False at their left padding.
  gen_ks/vs: per layer [B, K, H, S] / [B, K, S, H], each row's own tokens.
  step: slot of this step's token in the gen cache (it sees slots <= step).
  cpu_kernels: static; attend with cpu_decode.attention (f32 caches on CPU).
  """
  prompt_ks: Layers
  prompt_vs: Layers
  prompt_valid_BS: jax.Array
  gen_ks: Layers
  gen_vs: Layers
  step: jax.Array
  cpu_kernels: bool = struct.field(pytree_node=False, default=False)

  def attend(self, layer: int, q_BLNH: jax.Array, k_BLKH: jax.Array,
             v_BLKH: jax.Array) -> tuple[jax.Array, 'SharedPrefix']:
    rows, l, n, h = q_BLNH.shape
    assert l == 1, 'SharedPrefix decodes one token at a time'
    pk_BKHS, pv_BKSH = self.prompt_ks[layer], self.prompt_vs[layer]
    prompts, kv, _, _ = pk_BKHS.shape
    g, r = rows // prompts, n // kv
    dtype = pv_BKSH.dtype
    gk_BKHS = jax.lax.dynamic_update_slice(
        self.gen_ks[layer], k_BLKH.transpose(0, 2, 3, 1).astype(dtype),
        (0, 0, 0, self.step))
    gv_BKSH = jax.lax.dynamic_update_slice(
        self.gen_vs[layer], v_BLKH.transpose(0, 2, 1, 3).astype(dtype),
        (0, 0, self.step, 0))
    updated = self.replace(gen_ks=_set(self.gen_ks, layer, gk_BKHS),
                           gen_vs=_set(self.gen_vs, layer, gv_BKSH))
    if self.cpu_kernels:
      out_BKRH = cpu_decode.attention(
          q_BLNH.reshape(rows, kv, r, h), pk_BKHS, pv_BKSH,
          jnp.where(self.prompt_valid_BS, 0.0, NEG_INF), gk_BKHS, gv_BKSH,
          self.step)
      return out_BKRH.astype(q_BLNH.dtype).reshape(rows, 1, n, h), updated

    # Two softmax pieces merged by their maxima (as flash attention does):
    # no concatenation or transposition of score-sized arrays.
    # Prompt part: the G samples' queries of a prompt form one matmul
    # (M = G * R queries per prompt and kv head).
    q_BKMH = q_BLNH.reshape(prompts, g, kv, r, h).transpose(
        0, 2, 1, 3, 4).reshape(prompts, kv, g * r, h)
    sp_BKMS = jnp.einsum('bkmh,bkhs->bkms', q_BKMH, pk_BKHS,
                         preferred_element_type=jnp.float32)
    sp_BKMS = jnp.where(self.prompt_valid_BS[:, None, None, :], sp_BKMS,
                        NEG_INF)
    op_BKMH, mp_BKM1, lp_BKM1 = _partial_softmax_av(sp_BKMS, pv_BKSH,
                                                    'bkms,bksh->bkmh')
    # Back to rows: [prompts, K, G * R, .] -> [rows, K, R, .].
    op_BKRH, mp_BKR1, lp_BKR1 = (
        a.reshape(prompts, kv, g, r, a.shape[-1]).transpose(
            0, 2, 1, 3, 4).reshape(rows, kv, r, a.shape[-1])
        for a in (op_BKMH, mp_BKM1, lp_BKM1))
    # Generated part: per row.
    q_BKRH = q_BLNH.reshape(rows, kv, r, h)
    sg_BKRS = jnp.einsum('bkrh,bkhs->bkrs', q_BKRH, gk_BKHS,
                         preferred_element_type=jnp.float32)
    slots = gk_BKHS.shape[3]
    sg_BKRS = jnp.where(jnp.arange(slots) <= self.step, sg_BKRS, NEG_INF)
    og_BKRH, mg_BKR1, lg_BKR1 = _partial_softmax_av(sg_BKRS, gv_BKSH,
                                                    'bkrs,bksh->bkrh')
    m_BKR1 = jnp.maximum(mp_BKR1, mg_BKR1)
    wp_BKR1, wg_BKR1 = jnp.exp(mp_BKR1 - m_BKR1), jnp.exp(mg_BKR1 - m_BKR1)
    out_BKRH = (op_BKRH * wp_BKR1 + og_BKRH * wg_BKR1) / (
        lp_BKR1 * wp_BKR1 + lg_BKR1 * wg_BKR1)
    out_BKRH = out_BKRH.astype(q_BLNH.dtype)
    return out_BKRH.reshape(rows, 1, n, h), updated


def _partial_softmax_av(scores, values, spec):
  """Unnormalised softmax(scores) @ values, with the row max and row sum."""
  m = jnp.max(scores, -1, keepdims=True)
  e = jnp.exp(scores - m)
  out = jnp.einsum(spec, e.astype(values.dtype), values,
                   preferred_element_type=jnp.float32)
  return out, m, jnp.sum(e, -1, keepdims=True)


def _set(items: Layers, i: int, value: jax.Array) -> Layers:
  return items[:i] + (value,) + items[i + 1:]

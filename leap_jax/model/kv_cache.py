"""Attention cores: how a layer's queries see keys, with or without a cache.

`Causal` serves training, parity checks and prefill (where it can record
the prompt's keys/values). `SharedPrefix` serves decoding G samples per
prompt: the prompt's cache is kept once per prompt and read by all G
samples (G times less cache traffic than repeating it), while each sample's
own tokens go into a per-sample buffer updated in place.

Caches are one array per layer (slicing a stacked [L, ...] array costs a
copy per layer per step on XLA:CPU), kv-head-major, keys stored transposed
([B, K, H, S]) and values not ([B, K, S, H]): both attention matmuls then
read their right operand in the layout XLA:CPU's dot wants (the transposed
key layout made the score matmul ~2x faster in the decode loop).
"""

import jax
import jax.numpy as jnp
from flax import struct

from leap_jax.model import cpu_decode
from leap_jax.model.layers import NEG_INF, dot_attention

Layers = tuple[jax.Array, ...]


def _group(q_BTNH: jax.Array, num_kv_heads: int) -> jax.Array:
  """[B, T, N, H] -> [B, T, K, R, H]: HF's repeat_kv order (kv-head major)."""
  b, t, n, h = q_BTNH.shape
  return q_BTNH.reshape(b, t, num_kv_heads, n // num_kv_heads, h)


@struct.dataclass
class Causal:
  """Causal self-attention over the given tokens.

  valid_BT: False at padding keys (None: all valid).
  record: static; if set, each layer's keys ([B, K, H, T]) and values
  ([B, K, T, H]) are appended to ks/vs.
  """
  valid_BT: jax.Array | None = None
  ks: Layers = ()
  vs: Layers = ()
  record: bool = struct.field(pytree_node=False, default=False)

  def attend(self, layer: int, q_BTNH: jax.Array, k_BTKH: jax.Array,
             v_BTKH: jax.Array) -> tuple[jax.Array, 'Causal']:
    del layer  # layers attend in order; recording appends
    b, t, n, h = q_BTNH.shape
    mask_BTS = jnp.tril(jnp.ones((t, t), bool))[None]
    if self.valid_BT is not None:
      mask_BTS = mask_BTS & self.valid_BT[:, None, :]
    q_BTKRH = _group(q_BTNH, k_BTKH.shape[2])
    out_BTNH = dot_attention(q_BTKRH, k_BTKH, v_BTKH, mask_BTS).reshape(
        b, t, n, h)
    if not self.record:
      return out_BTNH, self
    return out_BTNH, self.replace(ks=self.ks + (k_BTKH.transpose(0, 2, 3, 1),),
                                  vs=self.vs + (v_BTKH.transpose(0, 2, 1, 3),))


@struct.dataclass
class SharedPrefix:
  """One-token decode step for X = B*G rows (prompt-major: row = b*G + g).

  prompt_ks/vs: per layer [B, K, H, P] / [B, K, P, H], the prompts' cache,
  shared by their G samples; prompt_valid_BP is False at their left padding.
  gen_ks/vs: per layer [X, K, H, S] / [X, K, S, H], each sample's own tokens.
  step: slot of this step's token in the gen cache (it sees slots <= step).
  cpu_kernels: static; attend with cpu_decode.attention (f32 caches on CPU).
  """
  prompt_ks: Layers
  prompt_vs: Layers
  prompt_valid_BP: jax.Array
  gen_ks: Layers
  gen_vs: Layers
  step: jax.Array
  cpu_kernels: bool = struct.field(pytree_node=False, default=False)

  def attend(self, layer: int, q_XTNH: jax.Array, k_XTKH: jax.Array,
             v_XTKH: jax.Array) -> tuple[jax.Array, 'SharedPrefix']:
    x, t, n, h = q_XTNH.shape
    assert t == 1, 'SharedPrefix decodes one token at a time'
    pk_BKHP, pv_BKPH = self.prompt_ks[layer], self.prompt_vs[layer]
    b, kv, _, p = pk_BKHP.shape
    g, r = x // b, n // kv
    dtype = pv_BKPH.dtype
    gk_XKHS = jax.lax.dynamic_update_slice(
        self.gen_ks[layer], k_XTKH.transpose(0, 2, 3, 1).astype(dtype),
        (0, 0, 0, self.step))
    gv_XKSH = jax.lax.dynamic_update_slice(
        self.gen_vs[layer], v_XTKH.transpose(0, 2, 1, 3).astype(dtype),
        (0, 0, self.step, 0))
    updated = self.replace(gen_ks=_set(self.gen_ks, layer, gk_XKHS),
                           gen_vs=_set(self.gen_vs, layer, gv_XKSH))
    if self.cpu_kernels:
      out_XKRH = cpu_decode.attention(
          q_XTNH.reshape(x, kv, r, h), pk_BKHP, pv_BKPH,
          jnp.where(self.prompt_valid_BP, 0.0, NEG_INF), gk_XKHS, gv_XKSH,
          self.step)
      return out_XKRH.astype(q_XTNH.dtype).reshape(x, 1, n, h), updated

    # Two softmax pieces merged by their maxima (as flash attention does):
    # no concatenation or transposition of score-sized arrays.
    # Prompt part: the G samples' queries of a prompt form one matmul.
    q_BKMH = q_XTNH.reshape(b, g, kv, r, h).transpose(0, 2, 1, 3, 4).reshape(
        b, kv, g * r, h)
    sp_BKMP = jnp.einsum('bkmh,bkhp->bkmp', q_BKMH, pk_BKHP,
                         preferred_element_type=jnp.float32)
    sp_BKMP = jnp.where(self.prompt_valid_BP[:, None, None, :], sp_BKMP,
                        NEG_INF)
    op_BKMH, mp_BKM1, lp_BKM1 = _partial_softmax_av(sp_BKMP, pv_BKPH,
                                                    'bkmp,bkph->bkmh')
    op_XKRH, mp_XKR1, lp_XKR1 = (
        a.reshape(b, kv, g, r, a.shape[-1]).transpose(0, 2, 1, 3, 4).reshape(
            x, kv, r, a.shape[-1]) for a in (op_BKMH, mp_BKM1, lp_BKM1))
    # Generated part: per row.
    q_XKRH = q_XTNH.reshape(x, kv, r, h)
    sg_XKRS = jnp.einsum('xkrh,xkhs->xkrs', q_XKRH, gk_XKHS,
                         preferred_element_type=jnp.float32)
    s = gk_XKHS.shape[3]
    sg_XKRS = jnp.where(jnp.arange(s) <= self.step, sg_XKRS, NEG_INF)
    og_XKRH, mg_XKR1, lg_XKR1 = _partial_softmax_av(sg_XKRS, gv_XKSH,
                                                    'xkrs,xksh->xkrh')
    m_XKR1 = jnp.maximum(mp_XKR1, mg_XKR1)
    wp_XKR1, wg_XKR1 = jnp.exp(mp_XKR1 - m_XKR1), jnp.exp(mg_XKR1 - m_XKR1)
    out_XKRH = (op_XKRH * wp_XKR1 + og_XKRH * wg_XKR1) / (
        lp_XKR1 * wp_XKR1 + lg_XKR1 * wg_XKR1)
    out_XKRH = out_XKRH.astype(q_XTNH.dtype)
    return out_XKRH.reshape(x, 1, n, h), updated


def _partial_softmax_av(scores, values, spec):
  """Unnormalised softmax(scores) @ values, with the row max and row sum."""
  m = jnp.max(scores, -1, keepdims=True)
  e = jnp.exp(scores - m)
  out = jnp.einsum(spec, e.astype(values.dtype), values,
                   preferred_element_type=jnp.float32)
  return out, m, jnp.sum(e, -1, keepdims=True)


def _set(items: Layers, i: int, value: jax.Array) -> Layers:
  return items[:i] + (value,) + items[i + 1:]

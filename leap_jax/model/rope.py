"""Rotary position embeddings with the scaling variants HF configs use.

Frequencies follow transformers' modeling_rope_utils; the rotation is the
"rotate half" layout of HF Llama/Qwen checkpoints (llama.cpp's interleaved
q/k layout is undone at GGUF load time).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from leap_jax.model.config import RopeConfig


def _base_inv_freq(theta: float, dim: int) -> np.ndarray:
  # f32 throughout, as transformers computes it.
  exponent = np.arange(0, dim, 2).astype(np.float32) / np.float32(dim)
  return np.float32(1.0) / np.float32(theta) ** exponent


def _llama3_inv_freq(rope: RopeConfig, dim: int) -> np.ndarray:
  inv_freq = _base_inv_freq(rope.theta, dim)
  old_len = rope.original_max_position
  low_wavelen = old_len / rope.low_freq_factor
  high_wavelen = old_len / rope.high_freq_factor
  wavelen = 2 * math.pi / inv_freq
  scaled = np.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
  smooth = (old_len / wavelen - rope.low_freq_factor) / (
      rope.high_freq_factor - rope.low_freq_factor)
  smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
  medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
  return np.where(medium, smoothed, scaled)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
  return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(rope: RopeConfig, dim: int) -> tuple[np.ndarray, float]:
  factor, base = rope.factor, rope.theta
  if rope.attention_factor is not None:
    attention_factor = rope.attention_factor
  elif rope.mscale and rope.mscale_all_dim:
    attention_factor = (_yarn_mscale(factor, rope.mscale) /
                        _yarn_mscale(factor, rope.mscale_all_dim))
  else:
    attention_factor = _yarn_mscale(factor)

  def correction_dim(rotations):
    return (dim * math.log(rope.original_max_position /
                           (rotations * 2 * math.pi))) / (2 * math.log(base))

  low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
  if rope.truncate:
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, dim - 1)
  if low == high:
    high += 0.001  # as HF: avoid a zero-width ramp
  ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low),
                 0, 1)
  extrapolation = 1 - ramp
  pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float32) / dim)
  inv_freq = (1 / (factor * pos_freqs) * (1 - extrapolation) +
              1 / pos_freqs * extrapolation)
  return inv_freq, float(attention_factor)


def inv_freq_and_scale(rope: RopeConfig, dim: int) -> tuple[np.ndarray, float]:
  """Static inverse frequencies [dim/2] and the cos/sin scale (yarn)."""
  if rope.kind in ('default', 'dynamic'):
    return _base_inv_freq(rope.theta, dim), 1.0
  if rope.kind == 'linear':
    return _base_inv_freq(rope.theta, dim) / rope.factor, 1.0
  if rope.kind == 'llama3':
    return _llama3_inv_freq(rope, dim), 1.0
  if rope.kind == 'yarn':
    return _yarn(rope, dim)
  raise NotImplementedError(rope.kind)


def _dynamic_inv_freq(rope: RopeConfig, dim: int, max_position: int,
                      positions_BL: jax.Array) -> jax.Array:
  # Dynamic NTK grows the base once the sequence outgrows the trained length.
  # Stateless: like HF for a forward that sees its longest position so far.
  seq_len = jnp.maximum(jnp.max(positions_BL) + 1, max_position)
  seq_len = seq_len.astype(jnp.float32)
  base = rope.theta * ((rope.factor * seq_len / max_position) -
                       (rope.factor - 1)) ** (dim / (dim - 2))
  exponent = jnp.arange(0, dim, 2, dtype=jnp.float32) / dim
  return 1.0 / base ** exponent


def sin_cos(rope: RopeConfig, head_dim: int, max_position: int,
            positions_BL: jax.Array) -> tuple[jax.Array, jax.Array]:
  """sin and cos tables [B, T, head_dim/2] in f32 for integer positions."""
  if rope.kind == 'dynamic':
    inv_freq = _dynamic_inv_freq(rope, head_dim, max_position, positions_BL)
    scale = 1.0
  else:
    inv_freq, scale = inv_freq_and_scale(rope, head_dim)
    inv_freq = jnp.asarray(inv_freq, jnp.float32)
  angles_BLE = positions_BL.astype(jnp.float32)[..., None] * inv_freq
  return jnp.sin(angles_BLE) * scale, jnp.cos(angles_BLE) * scale


def apply(x_BLNH: jax.Array, sin_BLE: jax.Array,
          cos_BLE: jax.Array) -> jax.Array:
  """Rotates the two halves of the head dim (HF `rotate_half` convention)."""
  x1, x2 = jnp.split(x_BLNH.astype(jnp.float32), 2, axis=-1)
  sin, cos = sin_BLE[:, :, None, :], cos_BLE[:, :, None, :]
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x_BLNH.dtype)

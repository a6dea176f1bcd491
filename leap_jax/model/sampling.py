"""Choosing the next token from logits: greedy, temperature, top-k, top-p.

The logprob returned is that of the chosen token under the
temperature-scaled distribution before top-k/top-p truncation
(log_softmax(logits / T); greedy: T = 1), which is what a trainer
recomputes from the same logits.

XLA:CPU sorts and Gumbel-max over a 50k vocabulary are slow (tens to
hundreds of ms per step), so top-p finds its threshold by bisection and
sampling inverts the CDF with one uniform per row, blockwise.
"""

import dataclasses

import jax
import jax.numpy as jnp

CDF_BLOCK = 256


@dataclasses.dataclass(frozen=True)
class Mode:
  """The static part of the sampling settings (it shapes the program)."""
  greedy: bool = False
  top_k: int = 0  # 0: off
  top_p: bool = False  # whether a top-p cut is applied (its value is traced)


def mode_for(temperature: float, top_k: int, top_p: float) -> Mode:
  if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
    raise ValueError(f'bad sampling settings: temperature={temperature} '
                     f'top_k={top_k} top_p={top_p}')
  return Mode(greedy=temperature == 0, top_k=int(top_k), top_p=top_p < 1)


def top_p_threshold(probs_BV: jax.Array, top_p: jax.Array) -> jax.Array:
  """Largest t [B, 1] with sum(p[p >= t]) >= top_p: the minimal top set.

  Bisection on the bit patterns of non-negative floats (monotone as int32),
  so 31 halvings pin t exactly.
  """
  bits_BV = jax.lax.bitcast_convert_type(probs_BV, jnp.int32)
  x = probs_BV.shape[0]
  lo = jnp.zeros((x, 1), jnp.int32)  # mass(lo) >= top_p always holds
  hi = jnp.full((x, 1), 0x7F800000, jnp.int32)

  def halve(_, bounds):
    lo, hi = bounds
    mid = lo + (hi - lo + 1) // 2
    mass = jnp.sum(jnp.where(bits_BV >= mid, probs_BV, 0), -1, keepdims=True)
    ok = mass >= top_p
    return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

  lo, _ = jax.lax.fori_loop(0, 31, halve, (lo, hi))
  return jax.lax.bitcast_convert_type(lo, jnp.float32)


def _last_positive(p: jax.Array) -> jax.Array:
  """Per row, the index of the last positive entry of p [rows, n]."""
  n = p.shape[-1]
  return n - 1 - jnp.argmax((p > 0)[:, ::-1], axis=-1)


def inverse_cdf(probs_BV: jax.Array, key: jax.Array) -> jax.Array:
  """One draw per row from unnormalised probs: block, then within block."""
  x, v = probs_BV.shape
  pad = -v % CDF_BLOCK
  p_blocks = jnp.pad(probs_BV, ((0, 0), (0, pad))).reshape(x, -1, CDF_BLOCK)
  block_mass = p_blocks.sum(-1)
  block_cdf = jnp.cumsum(block_mass, -1)
  u_B1 = jax.random.uniform(key, (x, 1)) * block_cdf[:, -1:]
  # Clamp to the last block/token with mass: rounding must never pick a
  # token that was filtered out.
  block_B = jnp.minimum(jnp.sum(block_cdf < u_B1, -1),
                        _last_positive(block_mass))
  base_B1 = jnp.take_along_axis(block_cdf - block_mass, block_B[:, None],
                                -1)
  inner = jnp.take_along_axis(p_blocks, block_B[:, None, None], 1)[:, 0]
  inner_cdf = base_B1 + jnp.cumsum(inner, -1)
  within_B = jnp.minimum(jnp.sum(inner_cdf < u_B1, -1),
                         _last_positive(inner))
  return block_B * CDF_BLOCK + within_B


def sample(logits_BV: jax.Array, key: jax.Array, mode: Mode,
           temperature: jax.Array, top_p: jax.Array
           ) -> tuple[jax.Array, jax.Array]:
  """Next tokens [B] int32 and their logprobs [B] f32."""
  logits_BV = logits_BV.astype(jnp.float32)
  if mode.greedy:
    tokens_B = jnp.argmax(logits_BV, axis=-1)
    logp_BV = jax.nn.log_softmax(logits_BV, axis=-1)
  else:
    scaled_BV = logits_BV / temperature
    logp_BV = jax.nn.log_softmax(scaled_BV, axis=-1)
    if mode.top_k:
      kth_B1 = jax.lax.top_k(scaled_BV, mode.top_k)[0][:, -1:]
      scaled_BV = jnp.where(scaled_BV >= kth_B1, scaled_BV, -jnp.inf)
    probs_BV = jax.nn.softmax(scaled_BV, axis=-1)
    if mode.top_p:
      probs_BV = jnp.where(probs_BV >= top_p_threshold(probs_BV, top_p),
                           probs_BV, 0.0)
    tokens_B = inverse_cdf(probs_BV, key)
  tokens_B = tokens_B.astype(jnp.int32)
  logprobs_B = jnp.take_along_axis(logp_BV, tokens_B[:, None], axis=-1)[:, 0]
  return tokens_B, logprobs_B

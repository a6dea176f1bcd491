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


def top_p_threshold(probs_XV: jax.Array, top_p: jax.Array) -> jax.Array:
  """Largest t [X, 1] with sum(p[p >= t]) >= top_p: the minimal top set.

  Bisection on the bit patterns of non-negative floats (monotone as int32),
  so 31 halvings pin t exactly.
  """
  bits_XV = jax.lax.bitcast_convert_type(probs_XV, jnp.int32)
  x = probs_XV.shape[0]
  lo = jnp.zeros((x, 1), jnp.int32)  # mass(lo) >= top_p always holds
  hi = jnp.full((x, 1), 0x7F800000, jnp.int32)

  def halve(_, bounds):
    lo, hi = bounds
    mid = lo + (hi - lo + 1) // 2
    mass = jnp.sum(jnp.where(bits_XV >= mid, probs_XV, 0), -1, keepdims=True)
    ok = mass >= top_p
    return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

  lo, _ = jax.lax.fori_loop(0, 31, halve, (lo, hi))
  return jax.lax.bitcast_convert_type(lo, jnp.float32)


def _last_positive(p_XN: jax.Array) -> jax.Array:
  n = p_XN.shape[-1]
  return n - 1 - jnp.argmax((p_XN > 0)[:, ::-1], axis=-1)


def inverse_cdf(probs_XV: jax.Array, key: jax.Array) -> jax.Array:
  """One draw per row from unnormalised probs: block, then within block."""
  x, v = probs_XV.shape
  pad = -v % CDF_BLOCK
  p_XNB = jnp.pad(probs_XV, ((0, 0), (0, pad))).reshape(x, -1, CDF_BLOCK)
  block_mass_XN = p_XNB.sum(-1)
  block_cdf_XN = jnp.cumsum(block_mass_XN, -1)
  u_X1 = jax.random.uniform(key, (x, 1)) * block_cdf_XN[:, -1:]
  # Clamp to the last block/token with mass: rounding must never pick a
  # token that was filtered out.
  block_X = jnp.minimum(jnp.sum(block_cdf_XN < u_X1, -1),
                        _last_positive(block_mass_XN))
  base_X1 = jnp.take_along_axis(block_cdf_XN - block_mass_XN, block_X[:, None],
                                -1)
  inner_XB = jnp.take_along_axis(p_XNB, block_X[:, None, None], 1)[:, 0]
  inner_cdf_XB = base_X1 + jnp.cumsum(inner_XB, -1)
  within_X = jnp.minimum(jnp.sum(inner_cdf_XB < u_X1, -1),
                         _last_positive(inner_XB))
  return block_X * CDF_BLOCK + within_X


def sample(logits_XV: jax.Array, key: jax.Array, mode: Mode,
           temperature: jax.Array, top_p: jax.Array
           ) -> tuple[jax.Array, jax.Array]:
  """Next tokens [X] int32 and their logprobs [X] f32."""
  logits_XV = logits_XV.astype(jnp.float32)
  if mode.greedy:
    tokens_X = jnp.argmax(logits_XV, axis=-1)
    logp_XV = jax.nn.log_softmax(logits_XV, axis=-1)
  else:
    scaled_XV = logits_XV / temperature
    logp_XV = jax.nn.log_softmax(scaled_XV, axis=-1)
    if mode.top_k:
      kth_X1 = jax.lax.top_k(scaled_XV, mode.top_k)[0][:, -1:]
      scaled_XV = jnp.where(scaled_XV >= kth_X1, scaled_XV, -jnp.inf)
    probs_XV = jax.nn.softmax(scaled_XV, axis=-1)
    if mode.top_p:
      probs_XV = jnp.where(probs_XV >= top_p_threshold(probs_XV, top_p),
                           probs_XV, 0.0)
    tokens_X = inverse_cdf(probs_XV, key)
  tokens_X = tokens_X.astype(jnp.int32)
  logprobs_X = jnp.take_along_axis(logp_XV, tokens_X[:, None], axis=-1)[:, 0]
  return tokens_X, logprobs_X

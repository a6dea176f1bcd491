"""The GRPO objective (design.md section 3).

Per token: rho = exp(logp - logp_old),
  loss = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A),
  for A < 0 at most -A c (dual-clip, c = rl.dual_clip)
  (+ beta * k3 with k3 = exp(ref - logp) - (ref - logp) - 1).
Aggregation is a fixed weight per token computed from the whole batch's
gradient mask (the response tokens that carry gradient: `gradient_mask`),
so the loss is a plain weighted sum: splitting the batch into micro-batches
and adding their sums gives exactly the large-batch loss.
"""

import jax
import jax.numpy as jnp


def token_logprobs(logits_BLV: jax.Array, targets_BL: jax.Array,
                   temperature: float = 1.0) -> jax.Array:
  """log softmax(logits / temperature)[target], f32 [B, L].

  The sampler reports logprobs under the same temperature-scaled
  distribution, so trainer and sampler numbers are comparable.
  """
  logits_BLV = logits_BLV.astype(jnp.float32) / temperature
  lse_BL = jax.nn.logsumexp(logits_BLV, axis=-1)
  picked_BL = jnp.take_along_axis(logits_BLV, targets_BL[..., None],
                                  axis=-1)[..., 0]
  return picked_BL - lse_BL


def slip_mask(sampler_logp_BL: jax.Array, adv_BL: jax.Array,
              mask_BL: jax.Array, slip_prob: float,
              negative_max_prob: float = 1.0) -> jax.Array:
  """Response tokens the slip guard takes out: A < 0 and sampled by the
  rollout policy with probability below slip_prob (KernelGYM's extreme-risk
  mask), or above negative_max_prob (< 1; 1: no ceiling).

  A small policy's failures are mostly slips at one unlikely token;
  pushing such a token further down moves the shared weights far (its
  log-prob gradient is largest) and drags every context with it. The text
  after a slip is text the policy is sure of (another task's memorised
  solution, the boilerplate every answer shares): with the ceiling a
  negative advantage lands only on the choices the policy was unsure of;
  its confident tokens are not walked down by (1 - eps_low) per pass."""
  adv_BL = jnp.asarray(adv_BL, jnp.float32)
  if adv_BL.ndim == 1:
    adv_BL = adv_BL[:, None]
  logp_BL = jnp.asarray(sampler_logp_BL)
  guarded_BL = logp_BL < jnp.log(jnp.float32(slip_prob))
  if negative_max_prob < 1.0:
    guarded_BL = guarded_BL | (logp_BL > jnp.log(
        jnp.float32(negative_max_prob)))
  return jnp.asarray(mask_BL, bool) & (adv_BL < 0) & guarded_BL


def aggregation_weights(mask_BL: jax.Array, aggregation: str,
                        norm_length: int = 1) -> jax.Array:
  """w[b, l] such that the aggregated loss is sum(w * loss_BL).

  mask_BL marks the tokens that carry gradient (response tokens, less rows
  with A = 0 and slip-guarded tokens unless a KL term applies: see
  batching), so denominators count only what is trained on:
  token_mean: 1 / (tokens in the batch).
  seq_mean_token_mean: 1 / (tokens in the row) / (rows with tokens).
  seq_mean_token_sum_norm: 1 / norm_length / (rows with tokens) (Dr. GRPO:
    a constant length, so long answers are not down-weighted per token).
  Rows without such tokens get weight 0 and do not count.
  """
  m_BL = jnp.asarray(mask_BL).astype(jnp.float32)
  per_row_B = jnp.sum(m_BL, axis=1)
  num_seqs = jnp.maximum(jnp.sum(per_row_B > 0), 1).astype(jnp.float32)
  if aggregation == 'token_mean':
    return m_BL / jnp.maximum(jnp.sum(m_BL), 1.0)
  if aggregation == 'seq_mean_token_mean':
    return m_BL / jnp.maximum(per_row_B, 1.0)[:, None] / num_seqs
  if aggregation == 'seq_mean_token_sum_norm':
    return m_BL / float(norm_length) / num_seqs
  raise ValueError(f'unknown aggregation {aggregation!r}')


def per_token_loss(logp_BL: jax.Array, old_logp_BL: jax.Array,
                   adv_BL: jax.Array, eps_low: float = 0.2,
                   eps_high: float = 0.28,
                   dual_clip: float = 0.0) -> tuple[jax.Array, jax.Array]:
  """Clipped surrogate per token and whether a clipped branch was taken
  (the PPO clip, or for A < 0 the dual clip's bound -A c; c = 0: none)."""
  rho_BL = jnp.exp(logp_BL - old_logp_BL)
  unclipped_BL = rho_BL * adv_BL
  clipped_BL = jnp.clip(rho_BL, 1.0 - eps_low, 1.0 + eps_high) * adv_BL
  loss_BL = -jnp.minimum(unclipped_BL, clipped_BL)
  taken_BL = clipped_BL < unclipped_BL
  if dual_clip:
    bound_BL = -adv_BL * dual_clip
    dual_BL = (adv_BL < 0) & (bound_BL < loss_BL)
    loss_BL = jnp.where(dual_BL, bound_BL, loss_BL)
    taken_BL = taken_BL | dual_BL
  return loss_BL, taken_BL


def k3(logp_BL: jax.Array, ref_logp_BL: jax.Array) -> jax.Array:
  """exp(ref - logp) - (ref - logp) - 1 >= 0: unbiased KL(pi || ref)."""
  d_BL = ref_logp_BL - logp_BL
  return jnp.exp(d_BL) - d_BL - 1.0


def grpo_loss(logp_BL: jax.Array, old_logp_BL: jax.Array, adv_B: jax.Array,
              weight_BL: jax.Array, mask_BL: jax.Array,
              ref_logp_BL: jax.Array | None = None, *, eps_low: float = 0.2,
              eps_high: float = 0.28, dual_clip: float = 0.0,
              kl_beta: float = 0.0) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Weighted-sum GRPO loss and token-level sums for metrics.

  adv_B is one advantage per row (one turn sample), broadcast over its
  response tokens, or one per token [B, L] (slip-guarded tokens hold 0).
  The aux values are sums, so micro-batches add up.
  """
  adv = jnp.asarray(adv_B, jnp.float32)
  adv_BL = jnp.broadcast_to(adv if adv.ndim == 2 else adv[:, None],
                            logp_BL.shape)
  mask_BL = jnp.asarray(mask_BL, bool)
  # Padding positions hold arbitrary logprobs: pin them so exp() cannot make
  # inf there (inf * 0 weight would be NaN in the gradient).
  logp_BL = jnp.where(mask_BL, logp_BL, 0.0)
  old_logp_BL = jnp.where(mask_BL, old_logp_BL, 0.0)
  loss_BL, clipped_BL = per_token_loss(logp_BL, old_logp_BL, adv_BL,
                                       eps_low, eps_high, dual_clip)
  m_BL = mask_BL.astype(jnp.float32)
  aux = {'tokens': jnp.sum(m_BL),
         'clipped_tokens': jnp.sum(clipped_BL * m_BL),
         'logp_sum': jnp.sum(jax.lax.stop_gradient(logp_BL) * m_BL),
         'policy_loss': jnp.sum(weight_BL * loss_BL)}
  if kl_beta and ref_logp_BL is not None:
    kl_BL = k3(logp_BL, jnp.where(mask_BL, ref_logp_BL, 0.0))
    loss_BL = loss_BL + kl_beta * kl_BL
    aux['kl_sum'] = jnp.sum(kl_BL * m_BL)
  loss = jnp.sum(weight_BL * loss_BL)
  aux['loss'] = loss
  return loss, aux

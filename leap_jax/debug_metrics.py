"""Per-step figures for debugging a GRPO run, from the merged rollout.

response_length_mean / _max: generated tokens per answer (stop token
  included), over every sampled turn.
response_cut_share: share of answers that ran into max_new_tokens (a rising
  share is the first sign of rambling or of a too small limit).
entropy: the policy's entropy per generated token, in nats, estimated from
  the sampler's logprobs: -mean log p(x) over the sampled tokens x. Those
  are drawn from softmax(logits / T) and their logprobs are under the same
  distribution, so the mean is an unbiased Monte Carlo estimate of its
  entropy, at no cost and over every sampled token (the update's forward
  pass would give the exact value only for the rows it trains, and needs
  the full-vocabulary softmax). With top_p < 1 the tokens come from the
  truncated distribution: the figure is then a cross-entropy (an upper
  bound of the truncated distribution's entropy).
tokens_per_second: tokens generated per second of sampling (all processes'
  tokens over the slowest process's sampling time).
reward_mean / _std, advantage_mean / _std / _min / _max: over the turns run
  (rewards as `rollout.turn_rewards`, advantages as the update used them);
  advantage_zero_share: turns that carry no gradient.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from leap_jax.rl.rollout import Rollout
from leap_jax.rollout_dump import is_cut


def _stats(prefix: str, values: np.ndarray, extremes: bool) -> dict[str, float]:
  if not values.size:
    return {}
  out = {f"{prefix}_mean": float(np.mean(values)),
         f"{prefix}_std": float(np.std(values))}
  if extremes:
    out.update({f"{prefix}_min": float(np.min(values)),
                f"{prefix}_max": float(np.max(values))})
  return out


def step_metrics(ro: Rollout, r_PGT: np.ndarray, adv_PGT: np.ndarray,
                 max_new_tokens: int, stop_token_ids: Collection[int],
                 seconds_sampling: float) -> dict[str, Any]:
  """The figures above for one step's merged rollout."""
  lengths = np.array([len(r.completion.token_ids) for r in ro.records])
  logps = np.concatenate([np.asarray(r.completion.logprobs, np.float64)
                          for r in ro.records] or [np.zeros((0,))])
  out: dict[str, Any] = {}
  if lengths.size:
    out.update(
        response_length_mean=float(lengths.mean()),
        response_length_max=int(lengths.max()),
        response_cut_share=float(np.mean([
            is_cut(list(r.completion.token_ids), max_new_tokens,
                   stop_token_ids) for r in ro.records])))
  if logps.size:
    out["entropy"] = float(-logps.mean())
  if seconds_sampling > 0:
    out["tokens_per_second"] = float(lengths.sum() / seconds_sampling)
  ran_PGT = np.asarray(ro.active_PGT, bool)
  out.update(_stats("reward", np.asarray(r_PGT)[ran_PGT], extremes=False))
  adv = np.asarray(adv_PGT)[ran_PGT]
  out.update(_stats("advantage", adv, extremes=True))
  if adv.size:
    out["advantage_zero_share"] = float(np.mean(adv == 0.0))
  return out

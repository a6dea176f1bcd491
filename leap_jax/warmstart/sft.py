"""Supervised warm start with the GRPO step itself.

With advantage 1 and logp_old equal to the current logp, the clipped GRPO
loss has exactly the gradient of token-mean cross-entropy on the answer
tokens (rho = 1, inside the clip range), so the warm start reuses the one
jitted update instead of keeping a second training step.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

import jax
import numpy as np

from leap_jax.rl import batching
from leap_jax.rl import train_step
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart.sft_data import Example

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SFTConfig:
  steps: int = 300
  batch_rows: int = 4
  learning_rate: float = 2e-3
  seq_len: int = 2048
  seed: int = 0


def _rl_config(cfg: SFTConfig) -> RLConfig:
  return RLConfig(learning_rate=cfg.learning_rate,
                  micro_batch_rows=cfg.batch_rows, num_micro_batches=1,
                  max_seq_len=cfg.seq_len, min_seq_bucket=256,
                  aggregation="token_mean", weight_decay=0.0)


def _samples(examples: Sequence[Example]) -> list[batching.TurnSample]:
  return [batching.TurnSample(list(e.prompt_ids), list(e.answer_ids),
                              np.zeros(len(e.answer_ids), np.float32), 1.0)
          for e in examples]


def train(graphdef, params, examples: Sequence[Example], cfg: SFTConfig,
          pad_id: int = 0, log_every: int = 25):
  """Returns (params, per-step mean answer-token loss in nats)."""
  if not examples:
    raise ValueError("no warm-start examples")
  rl_cfg = _rl_config(cfg)
  optimizer = train_step.make_optimizer(rl_cfg)
  opt_state = optimizer.init(params)
  step_fn = train_step.make_train_step(graphdef, optimizer, rl_cfg)
  logp_fn = train_step.make_logprob_fn(graphdef, rl_cfg)
  samples = _samples(examples)
  rng = np.random.default_rng(cfg.seed)
  losses, start = [], time.monotonic()
  for step in range(cfg.steps):
    rows = rng.choice(len(samples), size=min(cfg.batch_rows, len(samples)),
                      replace=False)
    batch = batching.pack([samples[i] for i in rows], rl_cfg, pad_id)
    batch = {k: jax.numpy.asarray(v) for k, v in batch.items()}
    logp = logp_fn(params, batch)
    batch["old_logp"] = logp
    nll = -float((np.asarray(logp) * np.asarray(batch["mask"])).sum()
                 / max(1, np.asarray(batch["mask"]).sum()))
    params, opt_state, _ = step_fn(params, opt_state, batch)
    losses.append(nll)
    if (step + 1) % log_every == 0 or step + 1 == cfg.steps:
      elapsed = time.monotonic() - start
      _LOG.info("warm start step %d/%d: answer loss %.3f nats/token, "
                "%.1f s elapsed, ETA %.0f s", step + 1, cfg.steps,
                np.mean(losses[-log_every:]), elapsed,
                elapsed / (step + 1) * (cfg.steps - step - 1))
  return params, losses

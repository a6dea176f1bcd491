"""Supervised warm start with the GRPO step itself.

With advantage 1 and no old_logp (the step then uses the current logp, so
rho = 1, inside the clip range), the clipped GRPO loss has exactly the
gradient of token-mean cross-entropy on the answer tokens, so the warm start
reuses the one jitted update instead of keeping a second training step.

Batches hold examples of one length bucket and about `batch_tokens` tokens
(many short rows or a few long ones), so short examples are not padded to
the longest one and every step costs about the same.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence

import jax
import numpy as np
import optax

from leap_jax.model.sampler import bucket
from leap_jax.rl import batching
from leap_jax.rl import train_step
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart.sft_data import Example

_LOG = logging.getLogger(__name__)
MIN_BUCKET = 64


@dataclasses.dataclass(frozen=True)
class SFTConfig:
  steps: int = 300
  batch_tokens: int = 4096      # rows x sequence length per step
  learning_rate: float = 2e-3   # peak; linear warm-up, cosine decay to 10%
  warmup_steps: int = 10
  seq_len: int = 1024
  seed: int = 0


def _rl_config(cfg: SFTConfig, rows: int = 1) -> RLConfig:
  return RLConfig(learning_rate=cfg.learning_rate, micro_batch_rows=rows,
                  num_micro_batches=1, max_seq_len=cfg.seq_len,
                  min_seq_bucket=MIN_BUCKET, aggregation="token_mean",
                  weight_decay=0.0)


def _samples(examples: Sequence[Example]) -> list[batching.TurnSample]:
  return [batching.TurnSample(list(e.prompt_ids), list(e.answer_ids),
                              np.zeros(len(e.answer_ids), np.float32), 1.0)
          for e in examples]


def length_bucket(example: Example, seq_len: int) -> int:
  return min(bucket(len(example.prompt_ids) + len(example.answer_ids) - 1,
                    MIN_BUCKET), bucket(seq_len))


def batches(examples: Sequence[Example], cfg: SFTConfig,
            rng: np.random.Generator) -> Iterator[tuple[int, list[int]]]:
  """Endless (length, example indices): each epoch shuffled, then cut into
  same-bucket batches of batch_tokens // length rows, in shuffled order."""
  lengths = [length_bucket(e, cfg.seq_len) for e in examples]
  while True:
    order = rng.permutation(len(examples))
    chunks = []
    for length in sorted(set(lengths)):
      idx = [int(i) for i in order if lengths[i] == length]
      rows = max(1, cfg.batch_tokens // length)
      chunks += [(length, idx[j:j + rows]) for j in range(0, len(idx), rows)]
    for k in rng.permutation(len(chunks)):
      yield chunks[k]


def train(graphdef, params, examples: Sequence[Example], cfg: SFTConfig,
          pad_id: int = 0, log_every: int = 25):
  """Returns (params, per-step mean answer-token loss in nats)."""
  if not examples:
    raise ValueError("no warm-start examples")
  warmup = max(1, min(cfg.warmup_steps, cfg.steps - 1))
  schedule = optax.warmup_cosine_decay_schedule(
      cfg.learning_rate / warmup, cfg.learning_rate, warmup,
      max(cfg.steps, 2), end_value=0.1 * cfg.learning_rate)
  optimizer = train_step.make_optimizer(_rl_config(cfg), schedule)
  opt_state = optimizer.init(params)
  step_fn = train_step.make_train_step(graphdef, optimizer, _rl_config(cfg))
  samples = _samples(examples)
  stream = batches(examples, cfg, np.random.default_rng(cfg.seed))
  losses, start = [], time.monotonic()
  for step in range(cfg.steps):
    length, rows = next(stream)
    rl_cfg = _rl_config(cfg, max(1, cfg.batch_tokens // length))
    batch = batching.pack([samples[i] for i in rows], rl_cfg, pad_id)
    batch = {k: jax.numpy.asarray(v) for k, v in batch.items()
             if k != "sampler_logp"}
    params, opt_state, metrics = step_fn(params, opt_state, batch)
    losses.append(-float(metrics["mean_logp"]))  # answer NLL before the step
    if (step + 1) % log_every == 0 or step + 1 == cfg.steps:
      elapsed = time.monotonic() - start
      _LOG.info("warm start step %d/%d: answer loss %.3f nats/token, "
                "%.1f s elapsed, ETA %.0f s", step + 1, cfg.steps,
                np.mean(losses[-log_every:]), elapsed,
                elapsed / (step + 1) * (cfg.steps - step - 1))
  return params, losses

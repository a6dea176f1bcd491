"""Turn samples -> padded token batches with loss masks, in length buckets.

Every turn is one row: context (task + history, feedback included) then the
model's response; only response tokens carry loss. Sequence lengths are
padded to a power of two (>= min_seq_bucket) and rows to
micro_batch_rows * num_micro_batches, so the train step compiles once per
(length, micro-batch count) bucket. Arrays come out as [M, B, L] (M
micro-batches of B rows of L positions).

Advantages are per token: the row's A on its response tokens, 0 on tokens
the slip guard takes out (grpo.slip_mask). The aggregation weights count
only tokens that carry gradient: with a KL term every response token does;
without one, tokens with A = 0 (rows the baseline zeroed, dropped
trajectories, slip-guarded tokens) do not, so the step size does not
depend on how many rows a mode leaves without signal.
"""

import dataclasses
from typing import Sequence

import numpy as np

from leap_jax.model.sampler import bucket
from leap_jax.rl import grpo
from leap_jax.rl.config import RLConfig


@dataclasses.dataclass
class TurnSample:
  """One training sample: a turn of one trajectory."""
  prompt_ids: list[int]
  response_ids: list[int]
  sampler_logprobs: np.ndarray  # [len(response_ids)]
  advantage: float
  prompt_index: int = 0
  sample_index: int = 0
  turn: int = 0  # 0-based


def fit(prompt: Sequence[int], response: Sequence[int],
        max_len: int) -> tuple[list[int], list[int]]:
  """Cuts a too-long sequence to max_len + 1 tokens (inputs are one shorter).

  The prompt loses tokens from its left end first (the task statement's
  start; the latest history stays), then the response its tail.
  """
  prompt, response = list(prompt), list(response)
  over = len(prompt) + len(response) - (max_len + 1)
  if over > 0:
    cut = min(over, max(len(prompt) - 1, 0))
    prompt, over = prompt[cut:], over - cut
  if over > 0:
    response = response[:len(response) - over]
  return prompt, response


def _group_rows(lengths: Sequence[int], cfg: RLConfig,
                by_length: bool) -> dict[int, list[int]]:
  """Sequence length -> the sample indices packed at that length."""
  max_len = bucket(cfg.max_seq_len)
  sized = [min(bucket(n, cfg.min_seq_bucket), max_len) for n in lengths]
  if not by_length:
    return {max(sized): list(range(len(sized)))}
  groups: dict[int, list[int]] = {}
  for i, length in enumerate(sized):
    groups.setdefault(length, []).append(i)
  return dict(sorted(groups.items()))


def split(samples: Sequence[TurnSample], parts: int,
          rng: np.random.Generator) -> list[list[TurnSample]]:
  """`samples` shuffled by `rng` and cut into `parts` near-equal lists (PPO
  mini-batches; fewer when there are fewer samples than parts)."""
  order = rng.permutation(len(samples))
  return [[samples[i] for i in chunk]
          for chunk in np.array_split(order, min(parts, len(samples)))]


def _token_advantages(samples: Sequence[TurnSample], seqs, full: int,
                      cfg: RLConfig) -> tuple[np.ndarray, np.ndarray]:
  """Response mask and per-token advantages [N, full] (target positions)."""
  mask = np.zeros((len(samples), full), bool)
  logp = np.zeros((len(samples), full), np.float32)
  adv = np.zeros((len(samples), full), np.float32)
  for i, (prompt, response) in enumerate(seqs):
    span = slice(len(prompt) - 1, len(prompt) - 1 + len(response))
    mask[i, span] = True
    logp[i, span] = np.asarray(samples[i].sampler_logprobs,
                               np.float32)[:len(response)]
    adv[i, span] = samples[i].advantage
  if cfg.slip_prob > 0 or cfg.negative_max_prob < 1:
    adv[np.asarray(grpo.slip_mask(logp, adv, mask, cfg.slip_prob,
                                  cfg.negative_max_prob))] = 0.0
  return mask, adv


def _micro_batches(n: int, cfg: RLConfig) -> int:
  needed = -(-n // cfg.micro_batch_rows)
  num_mb = cfg.num_micro_batches or bucket(needed)
  if needed > num_mb:
    raise ValueError(f'{n} samples do not fit {num_mb} micro-batches of '
                     f'{cfg.micro_batch_rows} rows')
  return num_mb


def pack_buckets(samples: Sequence[TurnSample], cfg: RLConfig,
                 pad_id: int = 0, by_length: bool = True,
                 skip_zero_advantage: bool = False
                 ) -> list[dict[str, np.ndarray]]:
  """Batch dicts, one per length bucket (shortest first); see `pack`.

  Short turns are not padded to the longest one's length: each bucket has
  its own [M, B, L] batch. Aggregation weights are computed over all
  samples together, so the buckets' gradients add up to the one-batch
  gradient (train_step.Update sums them before the optimizer step).
  skip_zero_advantage leaves out rows without gradient (every token at
  A = 0, and no KL term): the same gradient for less compute ([] if no row
  has any).
  """
  if not samples:
    raise ValueError('no samples to pack')
  seqs = [fit(s.prompt_ids, s.response_ids, bucket(cfg.max_seq_len))
          for s in samples]
  lengths = [len(p) + len(r) - 1 for p, r in seqs]
  full = max(lengths)
  mask, adv = _token_advantages(samples, seqs, full, cfg)
  carries = mask if cfg.kl_beta else mask & (adv != 0.0)
  weights = np.asarray(grpo.aggregation_weights(carries, cfg.aggregation,
                                                cfg.loss_norm_length))
  batches = []
  for length, idx in _group_rows(lengths, cfg, by_length).items():
    if skip_zero_advantage:
      idx = [i for i in idx if carries[i].any()]
      if not idx:
        continue
    n = _micro_batches(len(idx), cfg) * cfg.micro_batch_rows
    batch = {'inputs': np.full((n, length), pad_id, np.int32),
             'targets': np.full((n, length), pad_id, np.int32),
             'mask': np.zeros((n, length), bool),
             'weights': np.zeros((n, length), np.float32),
             'advantages': np.zeros((n, length), np.float32),
             'sampler_logp': np.zeros((n, length), np.float32)}
    for row, i in enumerate(idx):
      prompt, response = seqs[i]
      seq = np.asarray(prompt + response, np.int32)
      start = len(prompt) - 1  # target index of the first response token
      batch['inputs'][row, :len(seq) - 1] = seq[:-1]
      batch['targets'][row, :len(seq) - 1] = seq[1:]
      batch['mask'][row, start:start + len(response)] = True
      w = weights[i, :length]
      batch['weights'][row, :len(w)] = w
      batch['advantages'][row, :len(w)] = adv[i, :length]
      batch['sampler_logp'][row, start:start + len(response)] = np.asarray(
          samples[i].sampler_logprobs, np.float32)[:len(response)]
    batches.append({k: v.reshape(n // cfg.micro_batch_rows,
                                 cfg.micro_batch_rows, *v.shape[1:])
                    for k, v in batch.items()})
  return batches


def pack(samples: Sequence[TurnSample], cfg: RLConfig,
         pad_id: int = 0) -> dict[str, np.ndarray]:
  """One batch dict: inputs, targets, mask, weights, advantages, sampler_logp.

  targets[b, j] = sequence[j + 1]; mask marks targets that are response
  tokens. Aggregation weights are computed over the whole batch (so
  micro-batches sum to the large-batch loss). Every row is padded to the
  longest sample's bucket.
  """
  return pack_buckets(samples, cfg, pad_id, by_length=False)[0]

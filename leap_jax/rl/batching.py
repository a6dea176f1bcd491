"""Turn samples -> padded token batches with loss masks, in length buckets.

Every turn is one row: context (task + history, feedback included) then the
model's response; only response tokens carry loss. Sequence lengths are
padded to a power of two (>= min_seq_bucket) and rows to
micro_batch_rows * num_micro_batches, so the train step compiles once per
(length, micro-batch count) bucket. Arrays come out as [M, R, L].
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


def pack(samples: Sequence[TurnSample], cfg: RLConfig,
         pad_id: int = 0) -> dict[str, np.ndarray]:
  """Batch dict: inputs, targets, mask, weights, advantages, sampler_logp.

  targets[r, j] = sequence[j + 1]; mask marks targets that are response
  tokens. Aggregation weights are computed over the whole batch (so
  micro-batches sum to the large-batch loss).
  """
  if not samples:
    raise ValueError('no samples to pack')
  max_len = bucket(cfg.max_seq_len)
  seqs = [fit(s.prompt_ids, s.response_ids, max_len) for s in samples]
  longest = max(len(p) + len(r) - 1 for p, r in seqs)
  length = min(bucket(longest, cfg.min_seq_bucket), max_len)
  rows = cfg.micro_batch_rows
  needed = -(-len(samples) // rows)
  num_mb = cfg.num_micro_batches or bucket(needed)
  if needed > num_mb:
    raise ValueError(f'{len(samples)} samples do not fit {num_mb} micro-'
                     f'batches of {rows} rows')
  n = num_mb * rows
  inputs = np.full((n, length), pad_id, np.int32)
  targets = np.full((n, length), pad_id, np.int32)
  mask = np.zeros((n, length), bool)
  sampler_logp = np.zeros((n, length), np.float32)
  adv = np.zeros((n,), np.float32)
  for i, (s, (prompt, response)) in enumerate(zip(samples, seqs)):
    seq = np.asarray(prompt + response, np.int32)
    inputs[i, :len(seq) - 1] = seq[:-1]
    targets[i, :len(seq) - 1] = seq[1:]
    start = len(prompt) - 1  # target index of the first response token
    mask[i, start:start + len(response)] = True
    sampler_logp[i, start:start + len(response)] = np.asarray(
        s.sampler_logprobs, np.float32)[:len(response)]
    adv[i] = s.advantage
  weights = np.asarray(grpo.aggregation_weights(mask, cfg.aggregation,
                                                cfg.loss_norm_length))
  split = lambda x: x.reshape(num_mb, rows, *x.shape[1:])
  return {'inputs': split(inputs), 'targets': split(targets),
          'mask': split(mask), 'weights': split(weights),
          'advantages': split(adv), 'sampler_logp': split(sampler_logp)}

"""Turn samples -> padded [M, B, L] batches: masks, buckets, truncation,
the slip guard and what the loss denominators count."""

import chex
import numpy as np
import pytest

from leap_jax.rl import batching
from leap_jax.rl.config import RLConfig


def _sample(prompt, response, adv=1.0):
  return batching.TurnSample(prompt, response,
                             -0.1 * np.arange(1, len(response) + 1), adv)


def test_pack_masks_only_response_tokens():
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8)
  samples = [_sample([1, 2, 3], [4, 5], 0.5), _sample([6], [7, 8, 9], -1.0),
             _sample([10, 11], [12])]
  b = batching.pack(samples, cfg, pad_id=0)
  # 3 samples, 2 rows each: 2 micro-batches; longest input 4 -> bucket 8.
  chex.assert_shape(b['inputs'], (2, 2, 8))
  chex.assert_shape(b['advantages'], (2, 2, 8))
  inputs, targets = b['inputs'].reshape(4, 8), b['targets'].reshape(4, 8)
  mask = b['mask'].reshape(4, 8)
  np.testing.assert_array_equal(inputs[0, :4], [1, 2, 3, 4])
  np.testing.assert_array_equal(targets[0, :4], [2, 3, 4, 5])
  np.testing.assert_array_equal(mask[0], [0, 0, 1, 1, 0, 0, 0, 0])
  np.testing.assert_array_equal(targets[0][mask[0]], [4, 5])
  np.testing.assert_array_equal(targets[1][mask[1]], [7, 8, 9])
  np.testing.assert_array_equal(targets[2][mask[2]], [12])
  assert not mask[3].any()  # padding row
  np.testing.assert_allclose(b['sampler_logp'].reshape(4, 8)[1][mask[1]],
                             [-0.1, -0.2, -0.3], rtol=1e-6)
  adv = b['advantages'].reshape(4, 8)
  np.testing.assert_allclose(adv[mask], [0.5, 0.5, -1, -1, -1, 1])
  assert not adv[~mask].any()
  # token_mean weights: 1 / 6 response tokens on each of them.
  np.testing.assert_allclose(b['weights'].reshape(4, 8)[mask], 1 / 6)
  assert b['weights'].reshape(4, 8)[~mask].sum() == 0


def test_buckets_are_powers_of_two_and_fixed():
  cfg = RLConfig(micro_batch_rows=4, min_seq_bucket=16)
  short = batching.pack([_sample([1] * 5, [2] * 3)], cfg)
  longer = batching.pack([_sample([1] * 9, [2] * 7)] * 5, cfg)
  assert short['inputs'].shape == (1, 4, 16)
  assert longer['inputs'].shape == (2, 4, 16)
  assert batching.pack([_sample([1] * 30, [2] * 5)] * 9,
                       cfg)['inputs'].shape == (4, 4, 64)  # 3 -> 4 mbs
  fixed = cfg.replace(num_micro_batches=3)
  assert batching.pack([_sample([1], [2])] * 9, fixed)['inputs'].shape == (
      3, 4, 16)
  with pytest.raises(ValueError):
    batching.pack([_sample([1], [2])] * 13, fixed)


def test_too_long_drops_prompt_from_the_left():
  cfg = RLConfig(micro_batch_rows=1, min_seq_bucket=8, max_seq_len=8)
  b = batching.pack([_sample(list(range(1, 11)), [50, 51, 52])], cfg)
  assert b['inputs'].shape == (1, 1, 8)
  # 9 tokens kept: prompt 5..10 (its start dropped), then the response.
  np.testing.assert_array_equal(b['inputs'][0, 0], [5, 6, 7, 8, 9, 10, 50, 51])
  np.testing.assert_array_equal(b['targets'][0, 0][b['mask'][0, 0]],
                                [50, 51, 52])


def test_seq_mean_weights():
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8,
                 aggregation='seq_mean_token_mean')
  b = batching.pack([_sample([1], [2, 3]), _sample([1], [2, 3, 4, 5])], cfg)
  w, m = b['weights'][0], b['mask'][0]
  np.testing.assert_allclose(w[0][m[0]], 1 / 2 / 2)
  np.testing.assert_allclose(w[1][m[1]], 1 / 4 / 2)


def test_pack_buckets_split_by_length_with_global_weights():
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8)
  samples = [_sample([1] * 3, [2] * 2), _sample([1] * 12, [2] * 4),
             _sample([1], [2] * 2)]
  short, long_ = batching.pack_buckets(samples, cfg)
  chex.assert_shape(short['inputs'], (1, 2, 8))
  chex.assert_shape(long_['inputs'], (1, 2, 16))
  # token_mean over all 8 response tokens, whichever bucket holds them.
  for b in (short, long_):
    np.testing.assert_allclose(b['weights'][b['mask']], 1 / 8)
  np.testing.assert_allclose(short['advantages'][0][short['mask'][0]], 1)
  np.testing.assert_array_equal(long_['targets'][0, 0][long_['mask'][0, 0]],
                                [2, 2, 2, 2])
  one = batching.pack(samples, cfg)
  chex.assert_shape(one['inputs'], (2, 2, 16))


def test_denominators_count_only_tokens_that_carry_gradient():
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8)
  samples = [_sample([1], [2, 3], 0.0), _sample([1], [2, 3, 4], 1.0),
             _sample([1] * 12, [2], 0.0)]
  (only,) = batching.pack_buckets(samples, cfg, skip_zero_advantage=True)
  np.testing.assert_allclose(only['advantages'][0, 0][only['mask'][0, 0]], 1)
  assert not only['mask'][0, 1].any()  # padding: the A = 0 rows are skipped
  # token_mean: 1 / 3, the one row with A != 0 (not 1 / 6 response tokens).
  np.testing.assert_allclose(only['weights'][only['mask']], 1 / 3)
  # The same weights when the zero rows are packed (they get weight 0).
  both = batching.pack(samples, cfg)
  m = both['mask'].reshape(-1, both['mask'].shape[-1])
  w = both['weights'].reshape(m.shape)
  np.testing.assert_allclose(w[1][m[1]], 1 / 3)
  assert not w[0].any() and not w[2].any()
  # seq_mean_token_mean: rows without gradient are not sequences either.
  seq = batching.pack(samples, cfg.replace(aggregation='seq_mean_token_mean'))
  np.testing.assert_allclose(seq['weights'].reshape(m.shape)[1][m[1]], 1 / 3)
  # With a KL term every response token carries gradient: 1 / 6.
  kl = batching.pack(samples, cfg.replace(kl_beta=0.1))
  np.testing.assert_allclose(kl['weights'].reshape(m.shape)[m], 1 / 6)
  assert batching.pack_buckets([_sample([1], [2], 0.0)], cfg,
                               skip_zero_advantage=True) == []


def test_slip_guard_takes_unlikely_negative_tokens_out():
  # Sampler probabilities .5, .001, .5 on a failed answer (A = -1) and on a
  # solved one (A = +1); slip_prob 0.01 guards only the failed answer's
  # second token: A 0 and weight 0 there, and token_mean divides by 5.
  probs = np.array([0.5, 0.001, 0.5])
  failed = batching.TurnSample([1], [2, 3, 4], np.log(probs), -1.0)
  solved = batching.TurnSample([1], [2, 3, 4], np.log(probs), 1.0)
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8, slip_prob=0.01)
  b = batching.pack([failed, solved], cfg)
  m = b['mask'][0]
  np.testing.assert_allclose(b['advantages'][0][m], [-1, 0, -1, 1, 1, 1])
  np.testing.assert_allclose(b['weights'][0][m], [.2, 0, .2, .2, .2, .2])
  off = batching.pack([failed, solved], cfg.replace(slip_prob=0.0))
  np.testing.assert_allclose(off['advantages'][0][m], [-1, -1, -1, 1, 1, 1])
  np.testing.assert_allclose(off['weights'][0][m], 1 / 6)
  # A row whose every token is guarded carries no gradient: skipped.
  all_low = batching.TurnSample([1], [2], np.log([0.001]), -1.0)
  assert batching.pack_buckets([all_low], cfg, skip_zero_advantage=True) == []


def test_negative_max_prob_takes_confident_negative_tokens_out():
  # Probabilities .5, .001, .9 on a failed (A = -1) and a solved answer;
  # the ceiling 0.8 with the floor off guards the failed answer's third
  # token only: token_mean then divides by the 5 tokens left.
  probs = np.array([0.5, 0.001, 0.9])
  failed = batching.TurnSample([1], [2, 3, 4], np.log(probs), -1.0)
  solved = batching.TurnSample([1], [2, 3, 4], np.log(probs), 1.0)
  cfg = RLConfig(micro_batch_rows=2, min_seq_bucket=8, slip_prob=0.0,
                 negative_max_prob=0.8)
  b = batching.pack([failed, solved], cfg)
  m = b['mask'][0]
  np.testing.assert_allclose(b['advantages'][0][m], [-1, -1, 0, 1, 1, 1])
  np.testing.assert_allclose(b['weights'][0][m], [.2, .2, 0, .2, .2, .2])


def test_split_shuffles_into_near_equal_parts():
  samples = [_sample([1], [2], adv=float(i)) for i in range(5)]
  parts = batching.split(samples, 2, np.random.default_rng(0))
  assert [len(p) for p in parts] == [3, 2]
  assert sorted(s.advantage for p in parts for s in p) == [0, 1, 2, 3, 4]
  again = batching.split(samples, 2, np.random.default_rng(0))
  assert [[s.advantage for s in p] for p in again] == [
      [s.advantage for s in p] for p in parts]  # same seed, same cut
  assert len(batching.split(samples, 8, np.random.default_rng(0))) == 5
  assert [len(p) for p in batching.split(samples, 1,
                                         np.random.default_rng(0))] == [5]

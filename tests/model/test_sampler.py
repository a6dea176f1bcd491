"""Sampler: greedy equals transformers' generate; buckets; no recompiles."""

import chex
import jax
import numpy as np
import pytest
import torch

from leap_jax.model import sampler as sampler_lib
from leap_jax.model import kv_cache, weights
from tests.model.conftest import needs_cpu_kernels, torch_model

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [3] * 17]


def _hf_greedy(model, prompt, n):
  with torch.no_grad():
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n,
                         min_new_tokens=n, do_sample=False, pad_token_id=0)
  return out[0, len(prompt):].tolist()


@pytest.mark.parametrize('family', ['llama', 'qwen2', 'qwen3'])
def test_greedy_matches_transformers_generate(tiny_dirs, family):
  graphdef, state, cfg = weights.load(tiny_dirs[family])
  batch = sampler_lib.Sampler(graphdef, state, cfg).generate(
      PROMPTS, num_samples=2, max_new_tokens=16, temperature=0.0,
      stop_token_ids=[])
  chex.assert_shape(batch.tokens, (6, 16))
  np.testing.assert_array_equal(batch.prompt_index, [0, 0, 1, 1, 2, 2])
  np.testing.assert_array_equal(batch.lengths, 16)
  model = torch_model(tiny_dirs[family])
  for row, prompt in enumerate(PROMPTS):
    expected = _hf_greedy(model, prompt, 16)
    assert batch.tokens[2 * row].tolist() == expected
    assert batch.tokens[2 * row + 1].tolist() == expected


def test_logprobs_are_the_models(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['llama'])
  batch = sampler_lib.Sampler(graphdef, state, cfg).generate(
      PROMPTS[:1], num_samples=3, max_new_tokens=6, temperature=0.7,
      stop_token_ids=[], rng=1)
  model = torch_model(tiny_dirs['llama'])
  for row in range(3):
    seq = torch.tensor([PROMPTS[0] + batch.tokens[row].tolist()])
    with torch.no_grad():
      logits = model(seq).logits[0, len(PROMPTS[0]) - 1:-1] / 0.7
    expected = torch.log_softmax(logits, -1).gather(
        -1, torch.tensor(batch.tokens[row])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(batch.logprobs[row], expected, atol=1e-4)


@needs_cpu_kernels
@pytest.mark.parametrize('family', ['llama', 'qwen2'])  # untied, tied
def test_cpu_kernel_samples_as_xla_dot(tiny_dirs, family):
  graphdef, state, cfg = weights.load(tiny_dirs[family])
  runs = [sampler_lib.Sampler(graphdef, state, cfg, cpu_kernels=kernel)
          .generate(PROMPTS, num_samples=2, max_new_tokens=12,
                    temperature=0.8, stop_token_ids=[], rng=5)
          for kernel in (False, True)]
  np.testing.assert_array_equal(runs[1].tokens, runs[0].tokens)
  np.testing.assert_allclose(runs[1].logprobs, runs[0].logprobs, atol=1e-5)


@needs_cpu_kernels
def test_new_params_are_packed_again(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['llama'])
  moved = jax.tree.map(lambda a: a * 1.5, state)
  run = lambda smp: smp.generate(PROMPTS, max_new_tokens=6, temperature=0.0,
                                 stop_token_ids=[])
  smp = sampler_lib.Sampler(graphdef, state, cfg, cpu_kernels=True)
  before = run(smp)
  smp.state = moved
  after = run(smp)
  fresh = run(sampler_lib.Sampler(graphdef, moved, cfg, cpu_kernels=True))
  np.testing.assert_array_equal(after.logprobs, fresh.logprobs)
  assert np.abs(after.logprobs - before.logprobs).max() > 1e-3


def test_stop_tokens_end_rows(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['qwen3'])
  smp = sampler_lib.Sampler(graphdef, state, cfg, pad_id=0)
  free = smp.generate(PROMPTS, max_new_tokens=8, temperature=0.0,
                      stop_token_ids=[])
  stop = int(free.tokens[0, 3])  # greedy row 0 emits it at step 3
  first = int(np.argmax(free.tokens[0] == stop))
  batch = smp.generate(PROMPTS, max_new_tokens=8, temperature=0.0,
                       stop_token_ids=[stop])
  assert batch.lengths[0] == first + 1
  assert batch.tokens[0, first] == stop
  assert (batch.tokens[0, first + 1:] == 0).all()
  assert (batch.logprobs[0, first + 1:] == 0).all()
  for row in range(len(PROMPTS)):
    n = batch.lengths[row]
    np.testing.assert_array_equal(batch.tokens[row, :n], free.tokens[row, :n])


def test_samples_differ_and_follow_top_k(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['qwen2'])
  smp = sampler_lib.Sampler(graphdef, state, cfg)
  batch = smp.generate(PROMPTS[:1], num_samples=8, max_new_tokens=12,
                       temperature=1.5, top_k=1, stop_token_ids=[], rng=3)
  greedy = smp.generate(PROMPTS[:1], max_new_tokens=12, temperature=0.0,
                        stop_token_ids=[])
  np.testing.assert_array_equal(batch.tokens, np.repeat(greedy.tokens, 8, 0))
  batch = smp.generate(PROMPTS[:1], num_samples=8, max_new_tokens=12,
                       temperature=1.5, top_p=0.9, stop_token_ids=[], rng=3)
  assert len({tuple(r) for r in batch.tokens.tolist()}) > 1
  again = smp.generate(PROMPTS[:1], num_samples=8, max_new_tokens=12,
                       temperature=1.5, top_p=0.9, stop_token_ids=[], rng=3)
  np.testing.assert_array_equal(batch.tokens, again.tokens)


def test_no_recompiles_after_warm_up(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['llama'])
  smp = sampler_lib.Sampler(graphdef, state, cfg)
  settings = dict(num_samples=2, temperature=1.0, top_p=0.95)
  smp.generate([[1, 2, 3], [4] * 9], max_new_tokens=20, **settings)
  sizes = (sampler_lib.prefill._cache_size(), sampler_lib.decode._cache_size())
  # Other lengths in the same buckets, other values of the traced settings.
  smp.generate([[7] * 16, [5]], max_new_tokens=32, rng=jax.random.key(4),
               stop_token_ids=[1, 2, 3], **{**settings, 'temperature': 0.5})
  smp.generate([[3] * 11, [2] * 2], max_new_tokens=17, rng=9,
               **{**settings, 'top_p': 0.5})
  assert (sampler_lib.prefill._cache_size(),
          sampler_lib.decode._cache_size()) == sizes
  # 3 and 4 prompts share the count bucket 4; only the first 3 come back.
  three = smp.generate([[1, 2], [3], [4, 5]], max_new_tokens=20, **settings)
  sizes = (sampler_lib.prefill._cache_size(), sampler_lib.decode._cache_size())
  smp.generate([[1, 2], [3], [4, 5], [6]], max_new_tokens=20, **settings)
  assert (sampler_lib.prefill._cache_size(),
          sampler_lib.decode._cache_size()) == sizes
  assert three.tokens.shape[0] == 6 and three.prompt_index.tolist() == [
      0, 0, 1, 1, 2, 2]
  # A longer prompt moves to the next bucket: exactly one more of each.
  smp.generate([[1] * 17, [2]], max_new_tokens=20, **settings)
  assert sampler_lib.prefill._cache_size() == sizes[0] + 1


def test_buckets_and_padding():
  assert [sampler_lib.bucket(n, 16) for n in (1, 16, 17, 300)] == [
      16, 16, 32, 512]
  assert [sampler_lib.prompt_bucket(n, 16) for n in (
      1, 16, 17, 33, 128, 129, 300, 321, 1000)] == [
          16, 16, 32, 48, 128, 160, 320, 384, 1024]
  # A bounded set: at most 8 buckets per octave.
  assert len({sampler_lib.prompt_bucket(n, 16) for n in range(1, 2049)}) <= 8 * 7
  tokens, valid = sampler_lib.left_pad([[1, 2], [3]], 4, pad_id=9)
  np.testing.assert_array_equal(tokens, [[9, 9, 1, 2], [9, 9, 9, 3]])
  np.testing.assert_array_equal(valid, [[0, 0, 1, 1], [0, 0, 0, 1]])


def test_rejects_empty_prompts(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['llama'])
  with pytest.raises(ValueError):
    sampler_lib.Sampler(graphdef, state, cfg).generate([[1], []])


def test_cache_bytes_use_generates_padding(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['qwen2'])
  smp = sampler_lib.Sampler(graphdef, state, cfg)
  assert smp.mesh is None  # one device: rows are not split
  got = smp.cache_bytes(prompts=3, samples=2, prompt_tokens=300,
                        new_tokens=100)
  want = kv_cache.cache_bytes(cfg, 4, 2, sampler_lib.prompt_bucket(300, 16),
                              128)
  assert got == want and got.per_device == got.total

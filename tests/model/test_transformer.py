"""Logits parity with transformers (PyTorch) for Llama, Qwen2, Qwen3."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from flax import nnx

from leap_jax.model import cpu_decode, kv_cache, transformer, weights
from tests.model.conftest import needs_cpu_kernels, torch_logits, torch_model, write_tiny

forward = jax.jit(transformer.forward, static_argnums=0)


def _tokens(shape, vocab=128, seed=0):
  return np.random.RandomState(seed).randint(0, vocab, shape).astype(np.int32)


def _max_diff(directory, tokens_BL):
  graphdef, state, _ = weights.load(directory)
  ours_BLV, _ = forward(graphdef, state, jnp.asarray(tokens_BL))
  ref_BLV = torch_logits(torch_model(directory), tokens_BL)
  chex.assert_shape(ours_BLV, ref_BLV.shape)
  return float(np.abs(np.asarray(ours_BLV) - ref_BLV).max())


@pytest.mark.parametrize('family', ['llama', 'qwen2', 'qwen3'])
def test_logits_match_transformers(tiny_dirs, family):
  diff = _max_diff(tiny_dirs[family], _tokens((2, 24)))
  print(f'{family}: max |logits diff| = {diff:.2e}')
  assert diff <= 1e-4


@pytest.mark.parametrize('rope', [
    {'rope_type': 'linear', 'factor': 4.0},
    {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0,
     'high_freq_factor': 4.0, 'original_max_position_embeddings': 16},
    {'rope_type': 'dynamic', 'factor': 2.0},
])
def test_rope_scaling_logits_match(tmp_path, rope):
  # max_position 32 < 48 tokens: dynamic scaling actually engages.
  directory = write_tiny(tmp_path, 'llama', rope_parameters={
      'rope_theta': 10000.0, **rope}, max_position_embeddings=32)
  assert _max_diff(directory, _tokens((1, 48))) <= 1e-4


def test_qwen2_tied_untied_and_llama_bias(tmp_path):
  assert _max_diff(write_tiny(tmp_path / 'q', 'qwen2'), _tokens((1, 9))) <= 1e-4
  directory = write_tiny(tmp_path / 'l', 'llama', attention_bias=True,
                         tie_word_embeddings=True)
  assert _max_diff(directory, _tokens((1, 9))) <= 1e-4


def test_left_padding_matches_unpadded(tiny_dirs):
  graphdef, state, _ = weights.load(tiny_dirs['qwen3'])
  tokens = _tokens((1, 10))
  plain_BLV, _ = forward(graphdef, state, jnp.asarray(tokens))
  padded = np.concatenate([np.zeros((1, 6), np.int32), tokens], axis=1)
  valid = np.arange(16)[None] >= 6
  positions = np.maximum(np.cumsum(valid, 1) - 1, 0)
  padded_BLV, _ = forward(graphdef, state, jnp.asarray(padded),
                          jnp.asarray(positions), kv_cache.Causal(valid))
  np.testing.assert_allclose(padded_BLV[:, 6:], plain_BLV, atol=1e-5)


def _loss_and_grads(graphdef, state, tokens_BL):
  def loss(state):
    return jnp.mean(transformer.forward(graphdef, state, tokens_BL)[0] ** 2)
  return jax.value_and_grad(loss)(state)


def _tree_max_diff(a, b, scaled=False):
  """max |a - b| over the leaves; scaled: divided by max(1, |b|), absolute
  below 1 and relative above (f32 sums of gradients near 30 round at about
  1e-5 absolute)."""
  def diff(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return np.abs(x - y) / (np.maximum(1.0, np.abs(y)) if scaled else 1.0)
  return max(float(diff(x, y).max())
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.parametrize('family', ['llama', 'qwen2', 'qwen3'])
def test_attention_paths_match_dot_logits_and_gradients(tiny_dirs, family):
  """Today's path (whole score matrix) against the blockwise ones, f32:
  blocks of 8 so a 24-token sequence takes several, and the Pallas kernels
  in interpret mode."""
  tokens = jnp.asarray(_tokens((2, 24)))
  graphdef, state, _ = weights.load(tiny_dirs[family], attention='dot')
  ref_logits, _ = forward(graphdef, state, tokens)
  ref_loss, ref_grads = _loss_and_grads(graphdef, state, tokens)
  for impl in ('chunked', 'pallas'):
    if impl == 'pallas' and family == 'qwen3':
      continue  # head_dim 24: the Pallas kernel needs a power of two
    graphdef, state, _ = weights.load(tiny_dirs[family], attention=impl,
                                      attention_block=8)
    logits, _ = forward(graphdef, state, tokens)
    loss, grads = _loss_and_grads(graphdef, state, tokens)
    diffs = (float(np.abs(np.asarray(logits - ref_logits)).max()),
             abs(float(loss - ref_loss)), _tree_max_diff(grads, ref_grads))
    print(f'{family} {impl}: max |logits|, |loss|, |grads| diff {diffs}')
    assert max(diffs) <= 1e-5, (impl, diffs)


@pytest.mark.parametrize('remat', ['full', 'dots', True])
def test_remat_policies_give_the_same_gradients(tiny_dirs, remat):
  tokens = jnp.asarray(_tokens((2, 8)))
  graphdef, state, _ = weights.load(tiny_dirs['llama'])
  remat_graphdef, remat_state, cfg = weights.load(tiny_dirs['llama'],
                                                  remat=remat)
  assert cfg.remat == ('full' if remat is True else remat)
  loss, grads = _loss_and_grads(graphdef, state, tokens)
  remat_loss, remat_grads = _loss_and_grads(remat_graphdef, remat_state,
                                            tokens)
  assert abs(float(loss - remat_loss)) <= 1e-6
  chex.assert_trees_all_close(grads, remat_grads, atol=1e-6)


@pytest.mark.parametrize('family', ['llama', 'qwen2'])
def test_chunked_token_logprobs_match_full_logits(tiny_dirs, family):
  """logp of the targets in chunks of 5 (not dividing 23) against
  log_softmax of the whole [B, L, V] logits, values and gradients."""
  from leap_jax.rl import grpo  # the reference the trainer used before
  graphdef, state, _ = weights.load(tiny_dirs[family], logprob_chunk=5)
  inputs, targets = (jnp.asarray(_tokens((2, 23), seed=s)) for s in (0, 1))

  def chunked(state):
    return transformer.token_logprobs(graphdef, state, inputs, targets, 0.7)

  def full(state):
    logits, _ = transformer.forward(graphdef, state, inputs)
    return grpo.token_logprobs(logits, targets, 0.7)

  np.testing.assert_allclose(np.asarray(chunked(state)),
                             np.asarray(full(state)), atol=1e-5)
  weights_BL = jnp.asarray(np.random.RandomState(2).randn(2, 23), jnp.float32)
  grad = lambda fn: jax.grad(lambda s: jnp.sum(fn(s) * weights_BL))(state)
  # The embedding's gradient reaches 29 here: 1.1e-5 apart is 6.5e-6 of it.
  assert _tree_max_diff(grad(chunked), grad(full), scaled=True) <= 1e-5


def test_layers_are_stacked_and_scanned_like_a_loop(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['qwen3'])
  axes = {path: var.get_metadata()['axes']
          for path, var in nnx.to_flat_state(state)}
  assert axes[('layers', 'attn', 'q_kernel')] == (
      'layers', 'embed', 'heads', 'head_dim')
  assert state['layers']['attn']['q_kernel'][...].shape[0] == cfg.num_layers
  tokens = jnp.asarray(_tokens((2, 9)))
  scanned, _ = forward(graphdef, state, tokens)
  looped, _ = forward(graphdef, transformer.split_layers(state), tokens)
  np.testing.assert_allclose(np.asarray(scanned), np.asarray(looped),
                             atol=1e-6)
  split = transformer.split_layers(state)
  assert transformer.split_layers(split) is not None  # a no-op when split
  layer1 = transformer.layer_params(split['layers'], 1)
  np.testing.assert_array_equal(
      np.asarray(layer1['mlp']['up_kernel'][...]),
      np.asarray(state['layers']['mlp']['up_kernel'][...][1]))


def test_init_and_abstract_model_agree():
  cfg = weights.hf_weights.from_hf_config({
      'model_type': 'qwen3', 'vocab_size': 32, 'hidden_size': 16,
      'intermediate_size': 24, 'num_hidden_layers': 1,
      'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 8})
  _, state = transformer.init(cfg)
  _, abstract = transformer.abstract_model(cfg)
  chex.assert_trees_all_equal_shapes(state, abstract)
  n = sum(x.size for x in jax.tree.leaves(state))
  # num_params ignores the two q/k-norm vectors per layer.
  assert cfg.num_params() == n - 2 * cfg.head_dim * cfg.num_layers


@needs_cpu_kernels
@pytest.mark.parametrize('family', ['llama', 'qwen2', 'qwen3'])
def test_packed_state_gives_the_same_logits(tiny_dirs, family):
  graphdef, state, cfg = weights.load(tiny_dirs[family])
  packed = transformer.pack_for_decode(cfg, state)
  leaves = jax.tree.leaves(packed, is_leaf=lambda x: isinstance(
      x, cpu_decode.Packed))
  # 7 matmul weights a layer, plus the output projection (tied or not).
  assert sum(isinstance(x, cpu_decode.Packed) for x in leaves) == (
      7 * cfg.num_layers + 1)
  tokens = jnp.asarray(_tokens((2, 7)))
  ours, _ = forward(graphdef, packed, tokens)
  plain, _ = forward(graphdef, state, tokens)
  np.testing.assert_allclose(np.asarray(ours), np.asarray(plain), atol=1e-5)

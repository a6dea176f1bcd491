"""Logits parity with transformers (PyTorch) for Llama, Qwen2, Qwen3."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.model import cpu_decode, kv_cache, transformer, weights
from tests.model.conftest import needs_cpu_kernels, torch_logits, torch_model, write_tiny

forward = jax.jit(transformer.forward, static_argnums=0)


def _tokens(shape, vocab=128, seed=0):
  return np.random.RandomState(seed).randint(0, vocab, shape).astype(np.int32)


def _max_diff(directory, tokens_BT):
  graphdef, state, _ = weights.load(directory)
  ours_BTV, _ = forward(graphdef, state, jnp.asarray(tokens_BT))
  ref_BTV = torch_logits(torch_model(directory), tokens_BT)
  chex.assert_shape(ours_BTV, ref_BTV.shape)
  return float(np.abs(np.asarray(ours_BTV) - ref_BTV).max())


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
  plain_BTV, _ = forward(graphdef, state, jnp.asarray(tokens))
  padded = np.concatenate([np.zeros((1, 6), np.int32), tokens], axis=1)
  valid = np.arange(16)[None] >= 6
  positions = np.maximum(np.cumsum(valid, 1) - 1, 0)
  padded_BTV, _ = forward(graphdef, state, jnp.asarray(padded),
                          jnp.asarray(positions), kv_cache.Causal(valid))
  np.testing.assert_allclose(padded_BTV[:, 6:], plain_BTV, atol=1e-5)


def test_remat_gives_same_logits(tiny_dirs):
  tokens = jnp.asarray(_tokens((2, 8)))
  graphdef, state, _ = weights.load(tiny_dirs['llama'])
  remat_graphdef, remat_state, cfg = weights.load(tiny_dirs['llama'],
                                                  remat=True)
  assert cfg.remat

  def loss(graphdef, state):
    return jnp.mean(transformer.forward(graphdef, state, tokens)[0] ** 2)

  grads = jax.grad(loss, argnums=1)(graphdef, state)
  remat_grads = jax.grad(loss, argnums=1)(remat_graphdef, remat_state)
  chex.assert_trees_all_close(grads, remat_grads, atol=1e-6)


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
  assert cfg.num_params() == n - 2 * cfg.head_dim


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

"""ModelConfig from HF config dicts of the three families."""

import pytest

from leap_jax.model import config

BASE = {'vocab_size': 100, 'hidden_size': 32, 'intermediate_size': 48,
        'num_hidden_layers': 2, 'num_attention_heads': 4,
        'num_key_value_heads': 2}


def test_family_switches():
  llama = config.from_hf_config({**BASE, 'model_type': 'llama'})
  qwen2 = config.from_hf_config({**BASE, 'model_type': 'qwen2'})
  qwen3 = config.from_hf_config({**BASE, 'model_type': 'qwen3',
                                 'head_dim': 16, 'tie_word_embeddings': True})
  assert (llama.qkv_bias, llama.o_bias, llama.qk_norm) == (False, False, False)
  assert (qwen2.qkv_bias, qwen2.o_bias, qwen2.qk_norm) == (True, False, False)
  assert (qwen3.qkv_bias, qwen3.qk_norm, qwen3.tie_embeddings) == (
      False, True, True)
  assert (llama.head_dim, qwen3.head_dim) == (8, 16)
  biased = config.from_hf_config({**BASE, 'attention_bias': True})
  assert biased.qkv_bias and biased.o_bias


def test_rope_spellings():
  v5 = config.from_hf_config({**BASE, 'rope_parameters': {
      'rope_type': 'llama3', 'rope_theta': 5e5, 'factor': 8.0,
      'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
      'original_max_position_embeddings': 8192}})
  v4 = config.from_hf_config({**BASE, 'rope_theta': 5e5, 'rope_scaling': {
      'type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0,
      'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}})
  assert v5.rope == v4.rope
  assert (v5.rope.kind, v5.rope.theta, v5.rope.original_max_position) == (
      'llama3', 5e5, 8192)
  assert config.from_hf_config(BASE).rope.kind == 'default'


def test_eos_and_dtype():
  cfg = config.from_hf_config({**BASE, 'eos_token_id': [2, 7]})
  assert cfg.eos_token_ids == (2, 7)
  assert cfg.dtype == 'float32'  # CPU default
  assert config.from_hf_config(BASE, dtype='bfloat16').dtype == 'bfloat16'


@pytest.mark.parametrize('bad', [
    {'model_type': 'gpt2'}, {'use_sliding_window': True},
    {'hidden_act': 'gelu'}, {'rope_parameters': {'rope_type': 'longrope'}},
])
def test_unsupported_configs_raise(bad):
  with pytest.raises(NotImplementedError):
    config.from_hf_config({**BASE, **bad})


def test_flops_per_token_counts_matmuls_and_attention():
  cfg = config.from_hf_config({**BASE, 'tie_word_embeddings': True})
  assert cfg.flops_per_token(0) == pytest.approx(2 * cfg.num_params())
  extra = cfg.flops_per_token(10) - cfg.flops_per_token(0)
  assert extra == 4 * 2 * 4 * 8 * 10  # 4 * layers * heads * head_dim * ctx


def test_compute_switches_are_checked():
  cfg = config.from_hf_config({**BASE, 'model_type': 'llama'})
  assert (cfg.remat, cfg.attention) == ('none', 'auto')
  assert cfg.replace(remat=True).remat == 'full'
  assert cfg.replace(remat=False).remat == 'none'
  assert cfg.replace(remat='dots').remat == 'dots'
  with pytest.raises(ValueError, match='remat must be one of'):
    cfg.replace(remat='some')
  with pytest.raises(ValueError, match='attention must be one of'):
    cfg.replace(attention='flash')
  with pytest.raises(ValueError, match='logprob_chunk'):
    cfg.replace(logprob_chunk=0)

"""RoPE frequencies and rotation against transformers."""

import numpy as np
import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama import modeling_llama

from leap_jax.model import config, rope

HF = {'vocab_size': 10, 'hidden_size': 64, 'intermediate_size': 8,
      'num_hidden_layers': 1, 'num_attention_heads': 2,
      'max_position_embeddings': 4096}


@pytest.mark.parametrize('params', [
    {'rope_type': 'linear', 'factor': 4.0},
    {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0,
     'high_freq_factor': 4.0, 'original_max_position_embeddings': 512},
    {'rope_type': 'yarn', 'factor': 4.0,
     'original_max_position_embeddings': 1024},
])
def test_inv_freq_matches_transformers(params):
  hf = {**HF, 'rope_parameters': {'rope_theta': 10000.0, **params}}
  ours, scale = rope.inv_freq_and_scale(config.rope_from_hf(hf), 32)
  ref, ref_scale = ROPE_INIT_FUNCTIONS[params['rope_type']](
      transformers.LlamaConfig(**hf), 'cpu')
  np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-6)
  assert scale == pytest.approx(ref_scale)


def test_dynamic_grows_base_past_the_trained_length():
  cfg = config.RopeConfig(kind='dynamic', theta=10000.0, factor=2.0)
  positions = np.arange(100)[None]
  short, _ = rope.sin_cos(cfg, 32, 128, positions)
  default, _ = rope.sin_cos(config.RopeConfig(), 32, 128, positions)
  np.testing.assert_allclose(short, default, atol=1e-6)
  long, _ = rope.sin_cos(cfg, 32, 64, positions)
  assert np.abs(np.asarray(long) - np.asarray(default)).max() > 1e-2


def test_apply_matches_hf_rotate_half():
  rng = np.random.RandomState(0)
  q_BLNH = rng.randn(2, 5, 3, 16).astype(np.float32)
  positions = np.tile(np.arange(5), (2, 1))
  sin, cos = rope.sin_cos(config.RopeConfig(), 16, 128, positions)
  ours = np.asarray(rope.apply(q_BLNH, sin, cos))
  cos_hf = torch.tensor(np.concatenate([cos, cos], -1))
  sin_hf = torch.tensor(np.concatenate([sin, sin], -1))
  q_hf = torch.tensor(q_BLNH).transpose(1, 2)
  ref, _ = modeling_llama.apply_rotary_pos_emb(q_hf, q_hf, cos_hf, sin_hf)
  np.testing.assert_allclose(ours, ref.transpose(1, 2).numpy(), atol=1e-6)

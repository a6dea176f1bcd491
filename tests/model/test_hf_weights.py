"""Hugging Face directories: single and sharded safetensors."""

import numpy as np
import pytest
import torch
import transformers

from leap_jax.model import hf_weights, weights
from tests.model.conftest import FAMILIES, TINY


def test_sharded_index_equals_single_file(tmp_path, tiny_dirs):
  model = transformers.AutoModelForCausalLM.from_pretrained(
      tiny_dirs['qwen3'], dtype=torch.float32)
  model.save_pretrained(tmp_path, safe_serialization=True,
                        max_shard_size='20KB')
  files = hf_weights.safetensors_files(tmp_path)
  assert len(files) > 1 and (tmp_path / hf_weights.INDEX_FILE).is_file()
  sharded = hf_weights.open_tensors(tmp_path)
  single = hf_weights.open_tensors(tiny_dirs['qwen3'])
  assert sharded.keys() == single.keys()
  for name in single:
    np.testing.assert_array_equal(sharded[name][()], single[name][()])


def test_bf16_checkpoints_read_through_numpy(tmp_path):
  config_cls, model_cls, extra = FAMILIES['llama']
  model = model_cls(config_cls(**{**TINY, **extra})).to(torch.bfloat16)
  model.save_pretrained(tmp_path, safe_serialization=True)
  tensors = hf_weights.open_tensors(tmp_path)
  block = tensors['model.embed_tokens.weight'][2:4, :8]
  ref = model.model.embed_tokens.weight[2:4, :8].detach().float().numpy()
  np.testing.assert_array_equal(block.astype(np.float32), ref)
  _, state, _ = weights.load(tmp_path)  # cast to the f32 CPU default
  assert state['embed']['table_VD'][...].dtype == np.float32


def test_missing_files_raise(tmp_path):
  with pytest.raises(FileNotFoundError, match='config.json'):
    hf_weights.read_config(tmp_path)
  with pytest.raises(FileNotFoundError, match='model.safetensors'):
    hf_weights.safetensors_files(tmp_path)

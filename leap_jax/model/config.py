"""ModelConfig: the one description of a decoder-only transformer.

Covers the Llama, Qwen2 and Qwen3 families; `from_hf_config` reads a
Hugging Face config.json dict (transformers 4 and 5 spellings).
"""

import dataclasses
from typing import Any, Mapping

import jax

from leap_jax.model import attention as attention_lib

SUPPORTED_FAMILIES = ('llama', 'qwen2', 'qwen3')
ROPE_TYPES = ('default', 'linear', 'dynamic', 'llama3', 'yarn')
# What the backward pass recomputes of each scanned layer (transformer.py):
# none keeps every activation; full keeps only each layer's input and
# recomputes the rest; dots also keeps the matmul outputs.
REMAT_POLICIES = ('none', 'full', 'dots')


@dataclasses.dataclass(frozen=True)
class RopeConfig:
  """Rotary embedding parameters; the scaling fields used depend on `kind`."""
  kind: str = 'default'
  theta: float = 10000.0
  factor: float = 1.0
  # llama3
  low_freq_factor: float = 1.0
  high_freq_factor: float = 4.0
  # llama3, yarn: the pre-training context length.
  original_max_position: int = 0
  # yarn
  beta_fast: float = 32.0
  beta_slow: float = 1.0
  attention_factor: float | None = None
  mscale: float | None = None
  mscale_all_dim: float | None = None
  truncate: bool = True

  def __post_init__(self):
    if self.kind not in ROPE_TYPES:
      raise NotImplementedError(
          f'rope type {self.kind!r} is not supported (have {ROPE_TYPES})')


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Shapes and switches of the model; hashable so jit can take it static."""
  vocab_size: int
  embed_dim: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  mlp_dim: int
  rms_eps: float = 1e-6
  rope: RopeConfig = RopeConfig()
  max_position: int = 2048
  qkv_bias: bool = False  # Qwen2; Llama/Qwen3 with attention_bias
  o_bias: bool = False  # Llama/Qwen3 with attention_bias
  qk_norm: bool = False  # Qwen3
  tie_embeddings: bool = False
  dtype: str = 'float32'  # params and activations; norms/softmax in f32
  remat: str = 'none'  # REMAT_POLICIES; True/False read as full/none
  family: str = 'llama'
  eos_token_ids: tuple[int, ...] = ()
  # How a whole sequence attends (attention.IMPLEMENTATIONS) and in blocks
  # of how many tokens; token logprobs are computed this many at a time.
  attention: str = 'auto'
  attention_block: int = attention_lib.DEFAULT_BLOCK
  logprob_chunk: int = 512

  def __post_init__(self):
    if self.num_heads % self.num_kv_heads:
      raise ValueError(f'{self.num_heads} heads not divisible by '
                       f'{self.num_kv_heads} kv heads')
    if isinstance(self.remat, bool):
      object.__setattr__(self, 'remat', 'full' if self.remat else 'none')
    if self.remat not in REMAT_POLICIES:
      raise ValueError(f'remat must be one of {REMAT_POLICIES}, got '
                       f'{self.remat!r}')
    attention_lib.check_impl(self.attention)
    if self.attention_block < 1 or self.logprob_chunk < 1:
      raise ValueError('attention_block and logprob_chunk must be >= 1')

  def replace(self, **kw) -> 'ModelConfig':
    return dataclasses.replace(self, **kw)

  def num_params(self) -> int:
    d, h = self.embed_dim, self.head_dim
    attn = d * h * (2 * self.num_heads + 2 * self.num_kv_heads)
    layer = attn + 3 * d * self.mlp_dim + 2 * d
    head = 0 if self.tie_embeddings else self.vocab_size * d
    return self.num_layers * layer + self.vocab_size * d + head + d

  def flops_per_token(self, context_len: int) -> float:
    """Forward FLOPs for one token attending to `context_len` keys.

    2 per multiply-add of every matmul weight (the embedding lookup is free,
    the lm_head is not) plus QK^T and AV over the context.
    """
    d = self.embed_dim
    matmul_params = self.num_params() - self.vocab_size * d * (
        0 if self.tie_embeddings else 1)
    attn = 4 * self.num_layers * self.num_heads * self.head_dim * context_len
    return 2.0 * matmul_params + attn


def default_dtype() -> str:
  """f32 on CPU (exact, and XLA:CPU bf16 is slow); bf16 on accelerators."""
  return 'float32' if jax.default_backend() == 'cpu' else 'bfloat16'


def rope_from_hf(hf: Mapping[str, Any]) -> RopeConfig:
  """Reads transformers 5 `rope_parameters` or 4.x `rope_scaling`."""
  params = dict(hf.get('rope_parameters') or {})
  if 'rope_type' not in params and 'type' not in params:
    params.update(hf.get('rope_scaling') or {})
  theta = params.get('rope_theta', hf.get('rope_theta', 10000.0))
  kind = params.get('rope_type', params.get('type', 'default'))
  orig = params.get('original_max_position_embeddings') or hf.get(
      'max_position_embeddings', 0)
  factor = params.get('factor')
  if factor is None:
    factor = (hf.get('max_position_embeddings', orig) / orig
              if kind == 'yarn' and orig else 1.0)
  return RopeConfig(
      kind=kind, theta=float(theta), factor=float(factor),
      low_freq_factor=float(params.get('low_freq_factor', 1.0)),
      high_freq_factor=float(params.get('high_freq_factor', 4.0)),
      original_max_position=int(orig),
      beta_fast=float(params.get('beta_fast') or 32.0),
      beta_slow=float(params.get('beta_slow') or 1.0),
      attention_factor=params.get('attention_factor'),
      mscale=params.get('mscale'), mscale_all_dim=params.get('mscale_all_dim'),
      truncate=bool(params.get('truncate', True)))


def from_hf_config(hf: Mapping[str, Any], dtype: str | None = None
                   ) -> ModelConfig:
  """ModelConfig from a Hugging Face config.json dict."""
  family = hf.get('model_type', 'llama')
  if family not in SUPPORTED_FAMILIES:
    raise NotImplementedError(
        f'model_type {family!r} is not supported (have {SUPPORTED_FAMILIES})')
  if hf.get('use_sliding_window'):
    raise NotImplementedError('sliding-window attention is not supported')
  if hf.get('mlp_bias'):
    raise NotImplementedError('mlp_bias is not supported')
  if hf.get('hidden_act', 'silu') != 'silu':
    raise NotImplementedError(f"hidden_act {hf['hidden_act']!r} != 'silu'")
  rope = rope_from_hf(hf)
  if (hf.get('rope_parameters') or {}).get('partial_rotary_factor', 1.0) != 1.0:
    raise NotImplementedError('partial rotary embeddings are not supported')
  heads = hf['num_attention_heads']
  attention_bias = bool(hf.get('attention_bias', False))
  eos = hf.get('eos_token_id')
  eos = () if eos is None else tuple(eos) if isinstance(eos, list) else (eos,)
  return ModelConfig(
      vocab_size=hf['vocab_size'],
      embed_dim=hf['hidden_size'],
      num_layers=hf['num_hidden_layers'],
      num_heads=heads,
      num_kv_heads=hf.get('num_key_value_heads') or heads,
      head_dim=hf.get('head_dim') or hf['hidden_size'] // heads,
      mlp_dim=hf['intermediate_size'],
      rms_eps=float(hf.get('rms_norm_eps', 1e-6)),
      rope=rope,
      max_position=hf.get('max_position_embeddings', 2048),
      # Qwen2 always has q/k/v biases and never an o bias.
      qkv_bias=family == 'qwen2' or attention_bias,
      o_bias=family != 'qwen2' and attention_bias,
      qk_norm=family == 'qwen3',
      tie_embeddings=bool(hf.get('tie_word_embeddings', False)),
      dtype=dtype or default_dtype(),
      family=family,
      eos_token_ids=eos)

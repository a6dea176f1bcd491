"""GGUF checkpoints (llama.cpp): config from metadata, dequantized tensors.

Tensors are exposed under Hugging Face names so weights.hf_layout serves
both formats. Quantization blocks run along each row, so a read of a row
range dequantizes only those rows. llama.cpp's converter interleaves the
rotary halves of Llama q/k rows ("permute"); reads undo that per head.
"""

import os
import re
from typing import Any

import gguf
import numpy as np

from leap_jax.model import config as config_lib
from leap_jax.model.config import ModelConfig

# llama.cpp permutes q/k for these architectures only.
PERMUTED_QK_ARCHS = ('llama',)

_LAYER_NAMES = {
    'attn_norm.weight': 'input_layernorm.weight',
    'ffn_norm.weight': 'post_attention_layernorm.weight',
    'attn_q_norm.weight': 'self_attn.q_norm.weight',
    'attn_k_norm.weight': 'self_attn.k_norm.weight',
    'attn_output.weight': 'self_attn.o_proj.weight',
    'attn_output.bias': 'self_attn.o_proj.bias',
    'ffn_gate.weight': 'mlp.gate_proj.weight',
    'ffn_up.weight': 'mlp.up_proj.weight',
    'ffn_down.weight': 'mlp.down_proj.weight',
}
for _p in 'qkv':
  for _kind in ('weight', 'bias'):
    _LAYER_NAMES[f'attn_{_p}.{_kind}'] = f'self_attn.{_p}_proj.{_kind}'

_GLOBAL_NAMES = {
    'token_embd.weight': 'model.embed_tokens.weight',
    'output_norm.weight': 'model.norm.weight',
    'output.weight': 'lm_head.weight',
}


def hf_name(gguf_name: str) -> str | None:
  """HF tensor name for a GGUF one (None: not a model weight we use)."""
  if gguf_name in _GLOBAL_NAMES:
    return _GLOBAL_NAMES[gguf_name]
  m = re.fullmatch(r'blk\.(\d+)\.(.+)', gguf_name)
  if m and m.group(2) in _LAYER_NAMES:
    return f'model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}'
  return None


def unpermute_rows(w: np.ndarray, num_heads: int) -> np.ndarray:
  """Inverse of llama.cpp's permute for `num_heads` whole heads of rows."""
  head_half = w.shape[0] // num_heads // 2
  return (w.reshape(num_heads, head_half, 2, *w.shape[1:])
          .swapaxes(1, 2).reshape(w.shape))


class GGUFTensor:
  """Lazy dequantizing view of one GGUF tensor, in numpy [out, in] layout."""

  def __init__(self, tensor: Any, head_dim: int | None = None):
    self._tensor = tensor
    self._head_dim = head_dim  # set when rows need un-permuting
    self.shape = tuple(int(n) for n in reversed(tensor.shape))
    # The last rows dequantized: devices that split a tensor by columns
    # read the same rows one after another.
    self._last: tuple[tuple[int, int], np.ndarray] | None = None

  def __getitem__(self, index: Any) -> np.ndarray:
    index = tuple(index or ())
    index = index + (slice(None),) * (len(self.shape) - len(index))
    rows = range(*index[0].indices(self.shape[0]))
    start, stop = rows.start, max(rows.stop, rows.start)
    if self._head_dim:  # read whole heads so they can be un-permuted
      start = start // self._head_dim * self._head_dim
      stop = -(-stop // self._head_dim) * self._head_dim
    if self._last is not None and self._last[0] == (start, stop):
      block = self._last[1]
    else:
      raw = self._tensor.data[start:stop]
      block = gguf.quants.dequantize(raw, self._tensor.tensor_type)
      block = np.asarray(block, np.float32).reshape(
          (stop - start,) + self.shape[1:])
      if self._head_dim:
        block = unpermute_rows(block, (stop - start) // self._head_dim)
      self._last = ((start, stop), block)
    local = slice(rows.start - start, rows.stop - start, rows.step)
    return block[(local,) + index[1:]]


def _field(reader: gguf.GGUFReader, key: str, default: Any = None) -> Any:
  field = reader.get_field(key)
  return default if field is None else field.contents()


def config_from_gguf(reader: gguf.GGUFReader, dtype: str | None = None
                     ) -> ModelConfig:
  """ModelConfig from GGUF metadata (and which tensors exist)."""
  arch = _field(reader, 'general.architecture')
  if arch not in config_lib.SUPPORTED_FAMILIES:
    raise NotImplementedError(f'GGUF architecture {arch!r} is not supported')
  names = {t.name for t in reader.tensors}
  if 'rope_freqs.weight' in names:
    raise NotImplementedError('GGUF rope_freqs (llama3 scaling) unsupported')
  a = lambda key, default=None: _field(reader, f'{arch}.{key}', default)
  heads = a('attention.head_count')
  embed_dim = a('embedding_length')
  scaling = a('rope.scaling.type', 'none')
  rope = config_lib.RopeConfig(
      kind='default' if scaling == 'none' else scaling,
      theta=float(a('rope.freq_base', 10000.0)),
      factor=float(a('rope.scaling.factor', 1.0)),
      original_max_position=int(a('rope.scaling.original_context_length', 0)))
  vocab = a('vocab_size') or len(_field(reader, 'tokenizer.ggml.tokens'))
  eos = _field(reader, 'tokenizer.ggml.eos_token_id')
  return ModelConfig(
      vocab_size=int(vocab),
      embed_dim=int(embed_dim),
      num_layers=int(a('block_count')),
      num_heads=int(heads),
      num_kv_heads=int(a('attention.head_count_kv', heads)),
      head_dim=int(a('attention.key_length', embed_dim // heads)),
      mlp_dim=int(a('feed_forward_length')),
      rms_eps=float(a('attention.layer_norm_rms_epsilon', 1e-6)),
      rope=rope,
      max_position=int(a('context_length', 2048)),
      qkv_bias='blk.0.attn_q.bias' in names,
      o_bias='blk.0.attn_output.bias' in names,
      qk_norm='blk.0.attn_q_norm.weight' in names,
      tie_embeddings='output.weight' not in names,
      dtype=dtype or config_lib.default_dtype(),
      family=arch,
      eos_token_ids=() if eos is None else (int(eos),))


def open_checkpoint(path: str | os.PathLike, dtype: str | None = None
                    ) -> tuple[ModelConfig, dict[str, GGUFTensor]]:
  """(config, HF name -> lazy tensor) for a .gguf file."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f'{path}: no such GGUF file')
  reader = gguf.GGUFReader(path)
  cfg = config_from_gguf(reader, dtype=dtype)
  permuted = cfg.family in PERMUTED_QK_ARCHS
  tensors = {}
  for tensor in reader.tensors:
    name = hf_name(tensor.name)
    if name is None:
      continue
    qk = re.search(r'\.(q|k)_proj\.weight$', name)
    head_dim = cfg.head_dim if permuted and qk else None
    tensors[name] = GGUFTensor(tensor, head_dim)
  return cfg, tensors

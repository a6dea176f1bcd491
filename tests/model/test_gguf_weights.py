"""GGUF loading: q/k un-permutation, lazy row reads, SmolLM2 parity."""

import chex
import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from leap_jax.model import gguf_weights, sampler, tokenizer, transformer
from leap_jax.model import weights
from tests.model.conftest import torch_logits, torch_model, write_tiny

forward = jax.jit(transformer.forward, static_argnums=0)


def llama_cpp_permute(w, n_head):
  """llama.cpp convert_hf_to_gguf.py LlamaModel.permute."""
  return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
          .swapaxes(1, 2).reshape(w.shape))


def test_unpermute_inverts_llama_cpp_permute():
  w = np.random.RandomState(0).randn(3 * 8, 5)
  np.testing.assert_array_equal(
      gguf_weights.unpermute_rows(llama_cpp_permute(w, 3), 3), w)


def _write_gguf(hf_dir, path, cfg, quantize=()):
  """Our own tiny llama.cpp-style GGUF of an HF checkpoint (as converted)."""
  writer = gguf.GGUFWriter(str(path), 'llama')
  writer.add_block_count(cfg.num_layers)
  writer.add_embedding_length(cfg.embed_dim)
  writer.add_feed_forward_length(cfg.mlp_dim)
  writer.add_head_count(cfg.num_heads)
  writer.add_head_count_kv(cfg.num_kv_heads)
  writer.add_rope_freq_base(cfg.rope.theta)
  writer.add_layer_norm_rms_eps(cfg.rms_eps)
  writer.add_context_length(cfg.max_position)
  writer.add_vocab_size(cfg.vocab_size)
  for name, w in load_file(str(hf_dir / 'model.safetensors')).items():
    if name.endswith('q_proj.weight'):
      w = llama_cpp_permute(w, cfg.num_heads)
    elif name.endswith('k_proj.weight'):
      w = llama_cpp_permute(w, cfg.num_kv_heads)
    gguf_name = next(g for g in _all_gguf_names(cfg)
                     if gguf_weights.hf_name(g) == name)
    if gguf_name in quantize:
      q = gguf.GGMLQuantizationType.Q8_0
      writer.add_tensor(gguf_name, gguf.quants.quantize(w, q), raw_dtype=q)
    else:
      writer.add_tensor(gguf_name, w)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return path


def _all_gguf_names(cfg):
  names = list(gguf_weights._GLOBAL_NAMES)
  for i in range(cfg.num_layers):
    names += [f'blk.{i}.{n}' for n in gguf_weights._LAYER_NAMES]
  return names


def test_tiny_gguf_matches_its_hf_source(tmp_path):
  hf_dir = write_tiny(tmp_path / 'hf', 'llama')
  _, _, cfg = weights.load(hf_dir)
  path = _write_gguf(hf_dir, tmp_path / 'tiny.gguf', cfg)
  graphdef, state, gcfg = weights.load(path)
  fields = ('vocab_size', 'embed_dim', 'num_layers', 'num_heads',
            'num_kv_heads', 'head_dim', 'mlp_dim', 'tie_embeddings')
  assert [getattr(gcfg, f) for f in fields] == [getattr(cfg, f) for f in fields]
  tokens = np.random.RandomState(0).randint(0, 128, (2, 12)).astype(np.int32)
  ours, _ = forward(graphdef, state, jnp.asarray(tokens))
  ref = torch_logits(torch_model(hf_dir), tokens)
  assert np.abs(np.asarray(ours) - ref).max() <= 1e-4


def test_row_reads_dequantize_only_those_rows(tmp_path):
  hf_dir = write_tiny(tmp_path / 'hf', 'llama')
  _, _, cfg = weights.load(hf_dir)
  path = _write_gguf(hf_dir, tmp_path / 'q.gguf', cfg,
                     quantize=('blk.0.attn_q.weight', 'blk.0.ffn_up.weight'))
  _, tensors = gguf_weights.open_checkpoint(path)
  for name in ('model.layers.0.self_attn.q_proj.weight',
               'model.layers.0.mlp.up_proj.weight'):
    full = tensors[name][()]
    chex.assert_shape(full, tensors[name].shape)
    for rows in (slice(0, 16), slice(16, 48), slice(5, 37)):
      np.testing.assert_array_equal(tensors[name][rows, 8:40],
                                    full[rows, 8:40])


def test_smollm2_logits_match_transformers(smollm2_ours, smollm2_torch):
  graphdef, state, cfg = smollm2_ours
  assert (cfg.num_layers, cfg.num_heads, cfg.num_kv_heads) == (30, 9, 3)
  assert cfg.tie_embeddings and cfg.family == 'llama'
  tokens = np.random.RandomState(0).randint(0, cfg.vocab_size, (2, 40))
  ours, _ = forward(graphdef, state, jnp.asarray(tokens, jnp.int32))
  diff = np.abs(np.asarray(ours) - torch_logits(smollm2_torch, tokens)).max()
  print(f'SmolLM2 GGUF: max |logits diff| = {diff:.2e}')
  assert diff <= 1e-3


def test_smollm2_greedy_matches_transformers(smollm2_ours, smollm2_torch,
                                             smollm2_tokenizer):
  graphdef, state, cfg = smollm2_ours
  prompt = tokenizer.encode(
      smollm2_tokenizer, 'Write a Pallas kernel that adds two vectors.',
      chat=True)
  batch = sampler.Sampler(graphdef, state, cfg).generate(
      [prompt], max_new_tokens=32, temperature=0.0, stop_token_ids=[])
  with torch.no_grad():
    ref = smollm2_torch.generate(
        torch.tensor([prompt]), max_new_tokens=32, min_new_tokens=32,
        do_sample=False, pad_token_id=2)
  assert batch.tokens[0].tolist() == ref[0, len(prompt):].tolist()


def test_rejects_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError):
    gguf_weights.open_checkpoint(tmp_path / 'absent.gguf')

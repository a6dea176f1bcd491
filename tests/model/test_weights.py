"""Lazy layout views, the HF name table, and shard-by-shard placement."""

import itertools

import jax
import numpy as np
import pytest

from leap_jax.model import transformer, weights
from leap_jax.model.config import ModelConfig


class Counting:
  """A numpy-backed lazy tensor that records what each read returns."""

  def __init__(self, array):
    self.array, self.shape, self.reads = array, array.shape, []

  def __getitem__(self, index):
    block = self.array[tuple(index)]
    self.reads.append(block.shape)
    return block


@pytest.mark.parametrize('source_shape,split,perm', [
    ((12, 5), (3, 4, 5), (2, 0, 1)),  # HF q_proj -> [D, N, H]
    ((5, 12), (5, 3, 4), (1, 2, 0)),  # HF o_proj -> [N, H, D]
    ((6, 4), (6, 4), (1, 0)),  # plain transpose
    ((12,), (3, 4), (0, 1)),  # bias -> [N, H]
])
def test_layout_view_reads_blocks(source_shape, split, perm):
  source = np.arange(np.prod(source_shape)).reshape(source_shape)
  expected = source.reshape(split).transpose(perm)
  view = weights.LayoutView(Counting(source), split, perm)
  assert view.shape == expected.shape
  cuts = [[slice(None), slice(0, 1), slice(1, n)] for n in expected.shape]
  for index in itertools.product(*cuts):
    np.testing.assert_array_equal(view[index], expected[index])


def test_layout_view_reads_only_the_heads_asked_for():
  source = Counting(np.zeros((4 * 8, 6)))  # 4 heads of 8, in 6
  view = weights.LayoutView(source, (4, 8, 6), (2, 0, 1))
  view[:, 2:4, :]
  assert source.reads == [(16, 6)]


def test_layout_view_rejects_merges():
  with pytest.raises(ValueError):
    weights.LayoutView(Counting(np.zeros((4, 6))), (24,), (0,))


def test_hf_layout_names():
  cfg = ModelConfig(vocab_size=10, embed_dim=8, num_layers=2, num_heads=2,
                    num_kv_heads=1, head_dim=4, mlp_dim=6)
  assert weights.hf_layout(('layers', 'attn', 'k_kernel'), cfg, 1) == (
      'model.layers.1.self_attn.k_proj.weight', (1, 4, 8), (2, 0, 1))
  assert weights.hf_layout(('layers', 'mlp', 'down_kernel'), cfg, 0) == (
      'model.layers.0.mlp.down_proj.weight', (8, 6), (1, 0))
  q_norm = weights.hf_layout(('layers', 'attn', 'q_norm', 'scale'), cfg, 0)
  assert q_norm[0] == 'model.layers.0.self_attn.q_norm.weight'
  assert weights.hf_layout(('embed', 'table_VD'), cfg) == (
      'model.embed_tokens.weight', None, None)


def test_stacked_reads_only_the_layers_and_block_asked_for():
  layers = [Counting(np.arange(24.0).reshape(4, 6) + 100 * i)
            for i in range(3)]
  view = weights.Stacked(layers)
  assert view.shape == (3, 4, 6)
  np.testing.assert_array_equal(
      view[1:3, :, 2:4], np.stack([t.array[:, 2:4] for t in layers[1:]]))
  assert layers[0].reads == [] and layers[1].reads == [(4, 2)]
  with pytest.raises(ValueError, match='differ in shape'):
    weights.Stacked([Counting(np.zeros((2, 3))), Counting(np.zeros((3, 2)))])


def test_model_view_stacks_each_layer_in_our_layout(tiny_dirs):
  cfg, tensors = weights.hf_weights.open_checkpoint(tiny_dirs['llama'])
  view = weights.model_view(('layers', 'attn', 'q_kernel'), cfg, tensors)
  d, n, h = cfg.embed_dim, cfg.num_heads, cfg.head_dim
  assert view.shape == (cfg.num_layers, d, n, h)
  hf = tensors['model.layers.1.self_attn.q_proj.weight'][()]
  np.testing.assert_array_equal(view[1:2][0],
                                hf.reshape(n, h, d).transpose(2, 0, 1))


def test_place_reports_missing_and_misshapen_tensors(tiny_dirs):
  cfg, tensors = weights.hf_weights.open_checkpoint(tiny_dirs['llama'])
  _, abstract = transformer.abstract_model(cfg)
  missing = dict(tensors)
  del missing['model.norm.weight']
  with pytest.raises(KeyError, match='model.norm.weight'):
    weights.place(abstract, missing, cfg)
  wrong = dict(tensors)
  wrong['model.norm.weight'] = Counting(np.zeros(3))
  with pytest.raises(ValueError, match='shape'):
    weights.place(abstract, wrong, cfg)


def test_load_places_on_this_process_first_device_by_default(tiny_dirs):
  _, state, cfg = weights.load(tiny_dirs['qwen3'], dtype='bfloat16',
                               attention='dot', remat='full')
  leaves = jax.tree.leaves(state)
  assert all(x.dtype == np.dtype('bfloat16') for x in leaves)
  assert {d for x in leaves for d in x.devices()} == {jax.local_devices()[0]}
  assert (cfg.dtype, cfg.attention, cfg.remat) == ('bfloat16', 'dot', 'full')

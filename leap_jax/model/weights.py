"""Checkpoint tensors -> model state, one shard at a time.

A checkpoint (hf_weights, gguf_weights) is a mapping from Hugging Face
tensor names to lazy tensors: objects with `shape` that return a numpy
block for a tuple of slices, reading only that block. `LayoutView` turns
HF's [out, in] layout into ours (split dims, then transpose) without
reading anything, `Stacked` puts the per-layer tensors under the model's
leading [layers] dim, and `place` builds each jax.Array with
make_array_from_callback over the given mesh's shardings, so every process
reads only the shards of its own devices (on any process count) and
nothing passes through one host whole.
"""

import math
import os
from typing import Any, Callable, Mapping, Protocol, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from leap_jax.model import gguf_weights, hf_weights, transformer
from leap_jax.model import sharding as sharding_lib
from leap_jax.model.config import ModelConfig

Index = tuple[slice, ...]


class LazyTensor(Protocol):
  shape: tuple[int, ...]

  def __getitem__(self, index: Index) -> np.ndarray:
    ...


def full_index(index: Any, shape: Sequence[int]) -> tuple[range, ...]:
  """Normalises a (possibly None/short) index into one range per dim."""
  if not isinstance(index, tuple):  # a bare slice (view[1:2]) or None
    index = () if index is None else (index,)
  index = index + (slice(None),) * (len(shape) - len(index))
  return tuple(range(*s.indices(n)) for s, n in zip(index, shape))


def _as_slice(r: range) -> slice:
  return slice(r.start, r.stop, r.step)


class LayoutView:
  """Lazy `source.reshape(split_shape).transpose(perm)`.

  The reshape may only split source dims (never merge them). A read maps the
  target block back to a box of the source: a split dim reads the exact row
  range when its inner parts are whole, otherwise the whole dim.
  """

  def __init__(self, source: LazyTensor, split_shape: Sequence[int],
               perm: Sequence[int]):
    self.source, self.split_shape, self.perm = source, tuple(split_shape), perm
    self.shape = tuple(self.split_shape[p] for p in perm)
    self.groups = []  # split dims of each source dim
    at = 0
    for n in source.shape:
      start, size = at, 1
      while size < n or at == start:
        size *= self.split_shape[at]
        at += 1
      if size != n:
        raise ValueError(f'{split_shape} does not split {source.shape}')
      self.groups.append(range(start, at))
    if at != len(self.split_shape):
      raise ValueError(f'{split_shape} does not split {source.shape}')

  def __getitem__(self, index: Any) -> np.ndarray:
    target = full_index(index, self.shape)
    split = [None] * len(self.split_shape)
    for j, p in enumerate(self.perm):
      split[p] = target[j]
    read, box_shape, after = [], [], []
    for group in self.groups:
      lead, inner = split[group[0]], [split[d] for d in group[1:]]
      inner_sizes = [self.split_shape[d] for d in group[1:]]
      inner_whole = all(r == range(n) for r, n in zip(inner, inner_sizes))
      if inner_whole and lead.step == 1:
        stride = math.prod(inner_sizes)
        read.append(slice(lead.start * stride, lead.stop * stride))
        box_shape += [len(lead)] + inner_sizes
        after += [slice(None)] * len(group)
      else:
        read.append(slice(None))
        box_shape += [self.split_shape[d] for d in group]
        after += [_as_slice(split[d]) for d in group]
    box = np.asarray(self.source[tuple(read)]).reshape(box_shape)
    return box[tuple(after)].transpose(self.perm)


class Stacked:
  """Lazy [layers, ...] view of one lazy tensor per layer."""

  def __init__(self, per_layer: Sequence[LazyTensor]):
    shapes = {tuple(t.shape) for t in per_layer}
    if len(shapes) != 1:
      raise ValueError(f'layers differ in shape: {sorted(shapes)}')
    self.per_layer = list(per_layer)
    self.shape = (len(per_layer),) + shapes.pop()

  def __getitem__(self, index: Any) -> np.ndarray:
    index = full_index(index, self.shape)
    rest = tuple(_as_slice(r) for r in index[1:])
    return np.stack([np.asarray(self.per_layer[i][rest]) for i in index[0]])


def hf_layout(path: tuple[Any, ...], cfg: ModelConfig, layer: int = 0
              ) -> tuple[str, tuple[int, ...] | None, tuple[int, ...] | None]:
  """HF tensor name of a model parameter (of `layer` for layer params), and
  the split/perm from HF's layout to ours.

  HF Linear weights are [out, in]; ours are input-first with heads split
  out. (None, None) means the layout already matches.
  """
  d, n, k, h, f = (cfg.embed_dim, cfg.num_heads, cfg.num_kv_heads,
                   cfg.head_dim, cfg.mlp_dim)
  name = path[-2] if path[-1] in ('scale',) else path[-1]
  if path[0] == 'embed':
    return 'model.embed_tokens.weight', None, None
  if path[0] == 'lm_head':
    return 'lm_head.weight', (cfg.vocab_size, d), (1, 0)
  if path[0] == 'final_norm':
    return 'model.norm.weight', None, None
  prefix = f'model.layers.{layer}.'
  norms = {'attn_norm': 'input_layernorm.weight',
           'mlp_norm': 'post_attention_layernorm.weight',
           'q_norm': 'self_attn.q_norm.weight',
           'k_norm': 'self_attn.k_norm.weight'}
  if name in norms:
    return prefix + norms[name], None, None
  heads = {'q': n, 'k': k, 'v': k, 'o': n}
  proj, kind = name.split('_')
  if proj in heads:
    suffix = 'weight' if kind == 'kernel' else 'bias'
    hf = f'{prefix}self_attn.{proj}_proj.{suffix}'
    if kind == 'bias' and proj == 'o':
      return hf, None, None
    if kind == 'bias':
      return hf, (heads[proj], h), (0, 1)
    if proj == 'o':
      return hf, (d, n, h), (1, 2, 0)
    return hf, (heads[proj], h, d), (2, 0, 1)
  out_in = {'gate': (f, d), 'up': (f, d), 'down': (d, f)}
  return f'{prefix}mlp.{proj}_proj.weight', out_in[proj], (1, 0)


def _tensor_view(path, cfg: ModelConfig, tensors: Mapping[str, LazyTensor],
                 layer: int = 0) -> LazyTensor:
  """One parameter's (one layer's) tensor in our layout, lazily."""
  name, split_shape, perm = hf_layout(path, cfg, layer)
  if name not in tensors:
    where = '/'.join(map(str, path))
    raise KeyError(f'checkpoint lacks {name} (for {where})')
  tensor = tensors[name]
  return tensor if split_shape is None else LayoutView(tensor, split_shape,
                                                       perm)


def model_view(path, cfg: ModelConfig, tensors: Mapping[str, LazyTensor]
               ) -> LazyTensor:
  """A model parameter as a lazy tensor of the model's own shape."""
  if path[0] == 'layers':
    return Stacked([_tensor_view(path, cfg, tensors, i)
                    for i in range(cfg.num_layers)])
  return _tensor_view(path, cfg, tensors)


def _reader(tensor: LazyTensor, dtype: Any) -> Callable[[Any], np.ndarray]:
  def read(index):
    return np.ascontiguousarray(tensor[index], dtype=dtype)
  return read


def default_mesh() -> Mesh:
  """This process's first device: single-process use and tests."""
  return Mesh(np.array(jax.local_devices()[:1]), ('data',))


def place(abstract_state: nnx.State, tensors: Mapping[str, LazyTensor],
          cfg: ModelConfig, mesh: Mesh | None = None,
          rules: sharding_lib.Rules = sharding_lib.DEFAULT_RULES) -> nnx.State:
  """Fills the abstract state from checkpoint tensors, shard by shard, over
  `mesh` (default: this process's first device)."""
  mesh = default_mesh() if mesh is None else mesh
  flat = []
  for path, var in nnx.to_flat_state(abstract_state):
    tensor = model_view(path, cfg, tensors)
    if tuple(tensor.shape) != tuple(var.shape):
      where = '/'.join(map(str, path))
      raise ValueError(f'{where}: checkpoint shape {tensor.shape} != '
                       f'model shape {var.shape}')
    axes = var.get_metadata().get('axes', (None,) * len(var.shape))
    spec = sharding_lib.logical_to_spec(axes, var.shape, mesh, rules)
    array = jax.make_array_from_callback(
        var.shape, NamedSharding(mesh, spec), _reader(tensor, var.dtype))
    flat.append((path, var.replace(array)))
  return nnx.from_flat_state(flat)


def load(path: str | os.PathLike, mesh: Mesh | None = None,
         rules: sharding_lib.Rules = sharding_lib.DEFAULT_RULES,
         dtype: str | None = None, **settings: Any
         ) -> tuple[nnx.GraphDef, nnx.State, ModelConfig]:
  """Model from an HF directory or a .gguf file: (graphdef, state, config).

  settings: ModelConfig's compute fields (remat, attention, ...).
  """
  path = os.fspath(path)
  module = gguf_weights if path.endswith('.gguf') else hf_weights
  cfg, tensors = module.open_checkpoint(path, dtype=dtype)
  cfg = cfg.replace(**settings)
  graphdef, abstract_state = transformer.abstract_model(cfg)
  return graphdef, place(abstract_state, tensors, cfg, mesh, rules), cfg

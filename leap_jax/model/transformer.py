"""The decoder-only transformer and its functional (split/merge) boundary.

The layers are one stacked Block: every layer parameter has a leading
[layers] dim (logical axis 'layers', replicated). Whole sequences
(training, prefill: a Causal core) run the layers as one lax.scan over that
dim, so one layer body is compiled whatever the depth, under the config's
remat policy. Decoding (one token a step, a SharedPrefix core) loops over
the layers in Python on their own arrays, split once per call
(`split_layers`, also under pack_for_decode): a scan there would copy each
layer's cache slice in and out every step.

Token logprobs (`token_logprobs`) never hold more than cfg.logprob_chunk
positions of [vocab] logits, in either pass (logprobs.py): [B, L, V] would
be 2.5 GB per row at 4096 tokens and a 152k vocabulary in f32.
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx, struct

from leap_jax.model import cpu_decode, kv_cache, logprobs, rope
from leap_jax.model.config import ModelConfig
from leap_jax.model.sharding import MeshRules, constrain_axes, constrain_rows
from leap_jax.model.layers import (MLP, Attention, Embed, RMSNorm, dense,
                                   param)

LAYERS_AXIS = 'layers'
LM_HEAD_AXES = ('embed', 'vocab')
# The params' tree layout; checkpoints of another layout do not restore.
PARAM_LAYOUT = 'stacked-layers'
# The matmul weights and how many leading dims each contracts.
MATMUL_NUM_IN = {'q_kernel': 1, 'k_kernel': 1, 'v_kernel': 1, 'o_kernel': 2,
                 'gate_kernel': 1, 'up_kernel': 1, 'down_kernel': 1,
                 'lm_head': 1}


class Block(nnx.Module):
  """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    self.attn_norm = RMSNorm(cfg.embed_dim, cfg.rms_eps, cfg.dtype, rngs)
    self.attn = Attention(cfg, rngs)
    self.mlp_norm = RMSNorm(cfg.embed_dim, cfg.rms_eps, cfg.dtype, rngs)
    self.mlp = MLP(cfg, rngs)

  def __call__(self, x_BLD, sin_BLE, cos_BLE, core, layer: int):
    attn_BLD, core = self.attn(self.attn_norm(x_BLD), sin_BLE, cos_BLE, core,
                               layer)
    x_BLD = x_BLD + attn_BLD
    return x_BLD + self.mlp(self.mlp_norm(x_BLD)), core


def stacked_blocks(cfg: ModelConfig, rngs: nnx.Rngs) -> Block:
  """cfg.num_layers Blocks as one, each parameter [layers, ...]."""

  @nnx.split_rngs(splits=cfg.num_layers)
  @nnx.vmap(in_axes=(0,), out_axes=0)
  def make(rngs):
    return Block(cfg, rngs)

  blocks = make(rngs)
  for _, node in nnx.iter_graph(blocks):
    if isinstance(node, nnx.Variable):
      node.set_metadata(axes=(LAYERS_AXIS,) + node.get_metadata()['axes'])
  return blocks


@struct.dataclass
class PerLayer:
  """A stacked parameter split into one array (or Packed) per layer."""
  parts: tuple[Any, ...]


def _is_per_layer(x) -> bool:
  return isinstance(x, PerLayer)


def layer_params(stacked: nnx.State, i: int) -> nnx.State:
  """Layer i's parameters from stacked or split (PerLayer) ones."""
  return jax.tree.map(lambda x: x.parts[i] if _is_per_layer(x) else x[i],
                      stacked, is_leaf=_is_per_layer)


def split_layers(state: nnx.State) -> nnx.State:
  """The state with every stacked layer parameter as a PerLayer (a no-op on
  a split state)."""

  def split(path, x):
    if path[0].key != 'layers' or _is_per_layer(x):
      return x
    return PerLayer(tuple(x[i] for i in range(x.shape[0])))

  return jax.tree_util.tree_map_with_path(split, state, is_leaf=_is_per_layer)


def _remat(fn, policy: str):
  if policy == 'none':
    return fn
  # full: only the body's inputs (the residual stream) are kept per layer.
  saveable = (None if policy == 'full' else
              jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
  return jax.checkpoint(fn, policy=saveable, prevent_cse=False)


def _scan_layers(block_def, stacked, x_BLD, sin_BLE, cos_BLE,
                 core: kv_cache.Causal, remat: str, mesh_rules: MeshRules | None):
  """All layers as one scan; a recording core gets every layer's cache."""
  template = core.replace(ks=(), vs=())

  def body(x_BLD, params):
    x_BLD, out = nnx.merge(block_def, params)(x_BLD, sin_BLE, cos_BLE,
                                               template, 0)
    x_BLD = constrain_rows(x_BLD, mesh_rules)
    return x_BLD, (out.ks[0], out.vs[0]) if core.record else None

  x_BLD, recorded = jax.lax.scan(_remat(body, remat), x_BLD, stacked)
  if core.record:
    ks, vs = recorded
    core = core.replace(ks=core.ks + tuple(ks), vs=core.vs + tuple(vs))
  return x_BLD, core


class Transformer(nnx.Module):
  """Llama / Qwen2 / Qwen3 decoder. Call: logits_BLV, core."""

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    self.cfg = cfg
    self.embed = Embed(cfg, rngs)
    self.layers = stacked_blocks(cfg, rngs)
    self.final_norm = RMSNorm(cfg.embed_dim, cfg.rms_eps, cfg.dtype, rngs)
    if not cfg.tie_embeddings:
      self.lm_head = param(rngs, (cfg.embed_dim, cfg.vocab_size),
                           LM_HEAD_AXES, cfg.dtype)

  def hidden(self, tokens_BL: jax.Array, positions_BL: jax.Array,
             core: Any = None, mesh_rules: MeshRules | None = None
             ) -> tuple[jax.Array, Any]:
    """Final-normed hidden states [B, L, D] and the updated attention core.

    mesh_rules: on a mesh, activations keep their rows split as the batch
    rule says (None: no constraint).
    """
    cfg = self.cfg
    if core is None:
      core = kv_cache.Causal(impl=cfg.attention, block=cfg.attention_block)
    sin_BLE, cos_BLE = rope.sin_cos(cfg.rope, cfg.head_dim, cfg.max_position,
                                    positions_BL)
    x_BLD = constrain_rows(self.embed(tokens_BL, mesh_rules), mesh_rules)
    block_def, stacked = nnx.split(self.layers)
    split = any(_is_per_layer(x) for x in jax.tree.leaves(
        stacked, is_leaf=_is_per_layer))
    if isinstance(core, kv_cache.Causal) and not split:
      x_BLD, core = _scan_layers(block_def, stacked, x_BLD, sin_BLE, cos_BLE,
                                 core, cfg.remat, mesh_rules)
    else:
      for i in range(cfg.num_layers):
        block = nnx.merge(block_def, layer_params(stacked, i))
        x_BLD, core = block(x_BLD, sin_BLE, cos_BLE, core, i)
    return self.final_norm(x_BLD), core

  def logits(self, x_BLD: jax.Array,
             mesh_rules: MeshRules | None = None) -> jax.Array:
    """Output projection; logits are f32 whatever the compute dtype."""
    if self.cfg.tie_embeddings:
      logits_BLV = self.embed.attend(x_BLD, mesh_rules)
    else:
      lm_head_DV = self.lm_head[...]
      if not isinstance(lm_head_DV, cpu_decode.Packed):
        lm_head_DV = constrain_axes(lm_head_DV, LM_HEAD_AXES, mesh_rules)
      logits_BLV = dense(x_BLD, lm_head_DV, 1)
    return logits_BLV.astype(jnp.float32)

  def token_logprobs(self, x_BLD: jax.Array, targets_BL: jax.Array,
                     temperature: float = 1.0,
                     mesh_rules: MeshRules | None = None) -> jax.Array:
    """log softmax(logits / temperature)[target], f32 [B, L], in chunks of
    cfg.logprob_chunk positions (logprobs.token_logprobs)."""
    if self.cfg.tie_embeddings:
      w = constrain_axes(self.embed.table_VD[...], Embed.AXES, mesh_rules)
    else:
      w = constrain_axes(self.lm_head[...], LM_HEAD_AXES, mesh_rules)
    return logprobs.token_logprobs(
        x_BLD, w, targets_BL, temperature, self.cfg.logprob_chunk,
        transposed=self.cfg.tie_embeddings, mesh_rules=mesh_rules)

  def __call__(self, tokens_BL: jax.Array,
               positions_BL: jax.Array | None = None,
               core: Any = None) -> tuple[jax.Array, Any]:
    x_BLD, core = self.hidden(tokens_BL, _positions(tokens_BL, positions_BL),
                              core)
    return self.logits(x_BLD), core


def _positions(tokens_BL, positions_BL):
  if positions_BL is not None:
    return positions_BL
  return jnp.broadcast_to(jnp.arange(tokens_BL.shape[1]), tokens_BL.shape)


def abstract_model(cfg: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
  """Graphdef and shape-only state: no parameter memory is allocated."""
  return nnx.split(nnx.eval_shape(lambda: Transformer(cfg, nnx.Rngs(0))))


def init(cfg: ModelConfig, seed: int = 0) -> tuple[nnx.GraphDef, nnx.State]:
  """A randomly initialised model, split for jit."""
  return nnx.split(Transformer(cfg, nnx.Rngs(seed)))


def pack_for_decode(cfg: ModelConfig, state: nnx.State) -> nnx.State:
  """The state split per layer with its matmul weights in cpu_decode's
  packed layout (the tied embedding table too, kept also as is for the
  token lookup)."""
  return cpu_decode.pack_state(
      split_layers(state), MATMUL_NUM_IN,
      frozenset({'table_VD'}) if cfg.tie_embeddings else frozenset())


def forward(graphdef: nnx.GraphDef, state: nnx.State, tokens_BL: jax.Array,
            positions_BL: jax.Array | None = None,
            core: Any = None) -> tuple[jax.Array, Any]:
  """Functional forward: merge, call. Jit it with graphdef static."""
  return nnx.merge(graphdef, state)(tokens_BL, positions_BL, core)


def token_logprobs(graphdef: nnx.GraphDef, state: nnx.State,
                   inputs_BL: jax.Array, targets_BL: jax.Array,
                   temperature: float = 1.0,
                   mesh_rules: MeshRules | None = None) -> jax.Array:
  """Functional logp [B, L] of targets after inputs (causal, no padding
  mask: right padding is never read by earlier positions)."""
  model = nnx.merge(graphdef, state)
  x_BLD, _ = model.hidden(inputs_BL, _positions(inputs_BL, None),
                          mesh_rules=mesh_rules)
  return model.token_logprobs(x_BLD, targets_BL, temperature, mesh_rules)

"""The decoder-only transformer and its functional (split/merge) boundary."""

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from leap_jax.model import cpu_decode, kv_cache, rope
from leap_jax.model.config import ModelConfig
from leap_jax.model.layers import (MLP, Attention, Embed, RMSNorm, dense,
                                   param)

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

  def __call__(self, x_BTD, sin_BTF, cos_BTF, core, layer: int):
    attn_BTD, core = self.attn(self.attn_norm(x_BTD), sin_BTF, cos_BTF, core,
                               layer)
    x_BTD = x_BTD + attn_BTD
    return x_BTD + self.mlp(self.mlp_norm(x_BTD)), core


def _block_call(block: Block, x_BTD, sin_BTF, cos_BTF, core, layer: int):
  return block(x_BTD, sin_BTF, cos_BTF, core, layer)


_remat_block_call = nnx.remat(_block_call, static_argnums=(5,))


class Transformer(nnx.Module):
  """Llama / Qwen2 / Qwen3 decoder. Call: logits_BTV, core."""

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    self.cfg = cfg
    self.embed = Embed(cfg, rngs)
    self.layers = nnx.List([Block(cfg, rngs) for _ in range(cfg.num_layers)])
    self.final_norm = RMSNorm(cfg.embed_dim, cfg.rms_eps, cfg.dtype, rngs)
    if not cfg.tie_embeddings:
      self.lm_head = param(rngs, (cfg.embed_dim, cfg.vocab_size),
                           ('embed', 'vocab'), cfg.dtype)

  def hidden(self, tokens_BT: jax.Array, positions_BT: jax.Array,
             core: Any = None) -> tuple[jax.Array, Any]:
    """Final-normed hidden states [B, T, D] and the updated attention core."""
    core = kv_cache.Causal() if core is None else core
    cfg = self.cfg
    sin_BTF, cos_BTF = rope.sin_cos(cfg.rope, cfg.head_dim, cfg.max_position,
                                    positions_BT)
    x_BTD = self.embed(tokens_BT)
    call = _remat_block_call if cfg.remat else _block_call
    for i, block in enumerate(self.layers):
      x_BTD, core = call(block, x_BTD, sin_BTF, cos_BTF, core, i)
    return self.final_norm(x_BTD), core

  def logits(self, x_BTD: jax.Array) -> jax.Array:
    """Output projection; logits are f32 whatever the compute dtype."""
    if self.cfg.tie_embeddings:
      logits_BTV = self.embed.attend(x_BTD)
    else:
      logits_BTV = dense(x_BTD, self.lm_head[...], 1)
    return logits_BTV.astype(jnp.float32)

  def __call__(self, tokens_BT: jax.Array,
               positions_BT: jax.Array | None = None,
               core: Any = None) -> tuple[jax.Array, Any]:
    if positions_BT is None:
      positions_BT = jnp.broadcast_to(jnp.arange(tokens_BT.shape[1]),
                                      tokens_BT.shape)
    x_BTD, core = self.hidden(tokens_BT, positions_BT, core)
    return self.logits(x_BTD), core


def abstract_model(cfg: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
  """Graphdef and shape-only state: no parameter memory is allocated."""
  return nnx.split(nnx.eval_shape(lambda: Transformer(cfg, nnx.Rngs(0))))


def init(cfg: ModelConfig, seed: int = 0) -> tuple[nnx.GraphDef, nnx.State]:
  """A randomly initialised model, split for jit."""
  return nnx.split(Transformer(cfg, nnx.Rngs(seed)))


def pack_for_decode(cfg: ModelConfig, state: nnx.State) -> nnx.State:
  """The state with its matmul weights in cpu_decode's packed layout (the
  tied embedding table too, kept also as is for the token lookup)."""
  return cpu_decode.pack_state(
      state, MATMUL_NUM_IN,
      frozenset({'table_VD'}) if cfg.tie_embeddings else frozenset())


def forward(graphdef: nnx.GraphDef, state: nnx.State, tokens_BT: jax.Array,
            positions_BT: jax.Array | None = None,
            core: Any = None) -> tuple[jax.Array, Any]:
  """Functional forward: merge, call. Jit it with graphdef static."""
  return nnx.merge(graphdef, state)(tokens_BT, positions_BT, core)

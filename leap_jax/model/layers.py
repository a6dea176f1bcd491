"""Transformer layers in Flax NNX: embedding, RMSNorm, attention, SwiGLU MLP.

Every parameter carries its logical axis names in the `axes` metadata;
sharding.py maps them onto a mesh. Kernels are stored input-first
(q_kernel [D, N, H], o_kernel [N, H, D], gate_kernel [D, F] ...) so each
matmul is one 2-D dot on free reshapes. Shape letters: leap_jax/__init__.py.
"""

import math
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import nnx

from leap_jax.model import cpu_decode, rope
from leap_jax.model.config import ModelConfig
from leap_jax.model.sharding import MeshRules, constrain_axes

_INIT_STD = 0.02


def param(rngs: nnx.Rngs, shape: tuple[int, ...], axes: tuple[str, ...],
          dtype: Any, init: str = 'normal') -> nnx.Param:
  """A parameter with logical axes; random init is only for fresh models."""
  assert len(shape) == len(axes), (shape, axes)
  if init == 'normal':
    value = _INIT_STD * jax.random.normal(rngs.params(), shape, dtype)
  elif init == 'ones':
    value = jnp.ones(shape, dtype)
  else:
    value = jnp.zeros(shape, dtype)
  return nnx.Param(value, axes=axes)


def dense(x: jax.Array, kernel: jax.Array, num_in: int) -> jax.Array:
  """Contracts x's last `num_in` dims with the kernel's first `num_in` dims.

  Done as one 2-D [M, K] @ [K, N] matmul on free reshapes: XLA:CPU copies
  the weights of a multi-dim einsum into another layout on every call. A
  cpu_decode.Packed kernel (decoding on CPU) goes to that kernel.
  """
  batch, out = x.shape[:x.ndim - num_in], kernel.shape[num_in:]
  k = math.prod(kernel.shape[:num_in])
  if not isinstance(kernel, cpu_decode.Packed):
    kernel = kernel.reshape(k, -1)
  return cpu_decode.matmul(x.reshape(-1, k), kernel).reshape(*batch, *out)


class RMSNorm(nnx.Module):
  """y = scale * x / rms(x), computed in f32 like HF."""

  def __init__(self, dim: int, eps: float, dtype: Any, rngs: nnx.Rngs,
               axis_name: str = 'norm'):
    self.eps = eps
    self.scale = param(rngs, (dim,), (axis_name,), dtype, 'ones')

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + self.eps)
    return self.scale[...] * x32.astype(x.dtype)


class Embed(nnx.Module):
  """Token embedding; also the output projection when embeddings are tied.

  mesh_rules (training on a mesh) pin the table to its own layout where it
  is read, so its gradient is built sharded (sharding.constrain_axes).
  """
  AXES = ('vocab', 'embed')

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    self.table_VD = param(rngs, (cfg.vocab_size, cfg.embed_dim), self.AXES,
                          cfg.dtype)

  def __call__(self, tokens_BL: jax.Array,
               mesh_rules: MeshRules | None = None) -> jax.Array:
    table_VD = constrain_axes(cpu_decode.unpacked(self.table_VD[...]),
                              self.AXES, mesh_rules)
    return jnp.take(table_VD, tokens_BL, axis=0)

  def attend(self, x_BLD: jax.Array,
             mesh_rules: MeshRules | None = None) -> jax.Array:
    b, l, d = x_BLD.shape
    table_VD = self.table_VD[...]
    if not isinstance(table_VD, cpu_decode.Packed):
      table_VD = constrain_axes(table_VD, self.AXES, mesh_rules)
    return cpu_decode.matmul(x_BLD.reshape(b * l, d), table_VD,
                             transposed=True).reshape(b, l, -1)


class AttentionCore(Protocol):
  """How attention sees keys: plain causal, or through a KV cache."""

  def attend(self, layer: int, q_BLNH: jax.Array, k_BLKH: jax.Array,
             v_BLKH: jax.Array) -> tuple[jax.Array, 'AttentionCore']:
    ...


class Attention(nnx.Module):
  """GQA with RoPE, optional q/k/v(/o) biases and q/k RMSNorm (Qwen3)."""

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    d, n, k, h, dt = (cfg.embed_dim, cfg.num_heads, cfg.num_kv_heads,
                      cfg.head_dim, cfg.dtype)
    self.cfg = cfg
    self.q_kernel = param(rngs, (d, n, h), ('embed', 'heads', 'head_dim'), dt)
    self.k_kernel = param(rngs, (d, k, h), ('embed', 'kv_heads', 'head_dim'),
                          dt)
    self.v_kernel = param(rngs, (d, k, h), ('embed', 'kv_heads', 'head_dim'),
                          dt)
    self.o_kernel = param(rngs, (n, h, d), ('heads', 'head_dim', 'embed'), dt)
    if cfg.qkv_bias:
      self.q_bias = param(rngs, (n, h), ('heads', 'head_dim'), dt, 'zeros')
      self.k_bias = param(rngs, (k, h), ('kv_heads', 'head_dim'), dt, 'zeros')
      self.v_bias = param(rngs, (k, h), ('kv_heads', 'head_dim'), dt, 'zeros')
    if cfg.o_bias:
      self.o_bias = param(rngs, (d,), ('embed',), dt, 'zeros')
    if cfg.qk_norm:
      self.q_norm = RMSNorm(h, cfg.rms_eps, dt, rngs, 'head_dim')
      self.k_norm = RMSNorm(h, cfg.rms_eps, dt, rngs, 'head_dim')

  def _project(self, name: str, x_BLD: jax.Array) -> jax.Array:
    kernel_DNH = getattr(self, f'{name}_kernel')[...]
    y_BLNH = dense(x_BLD, kernel_DNH, 1)
    if self.cfg.qkv_bias:
      y_BLNH = y_BLNH + getattr(self, f'{name}_bias')[...]
    if self.cfg.qk_norm and name in ('q', 'k'):
      y_BLNH = getattr(self, f'{name}_norm')(y_BLNH)
    return y_BLNH

  def __call__(self, x_BLD: jax.Array, sin_BLE: jax.Array, cos_BLE: jax.Array,
               core: AttentionCore, layer: int) -> tuple[jax.Array, Any]:
    q_BLNH = rope.apply(self._project('q', x_BLD), sin_BLE, cos_BLE)
    k_BLKH = rope.apply(self._project('k', x_BLD), sin_BLE, cos_BLE)
    v_BLKH = self._project('v', x_BLD)
    # Scale q once here rather than every score.
    q_BLNH = q_BLNH * jnp.asarray(self.cfg.head_dim ** -0.5, q_BLNH.dtype)
    out_BLNH, core = core.attend(layer, q_BLNH, k_BLKH, v_BLKH)
    out_BLD = dense(out_BLNH, self.o_kernel[...], 2)
    if self.cfg.o_bias:
      out_BLD = out_BLD + self.o_bias[...]
    return out_BLD, core


class MLP(nnx.Module):
  """SwiGLU: down(silu(gate(x)) * up(x))."""

  def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
    d, f, dt = cfg.embed_dim, cfg.mlp_dim, cfg.dtype
    self.gate_kernel = param(rngs, (d, f), ('embed', 'mlp'), dt)
    self.up_kernel = param(rngs, (d, f), ('embed', 'mlp'), dt)
    self.down_kernel = param(rngs, (f, d), ('mlp', 'embed'), dt)

  def __call__(self, x_BLD: jax.Array) -> jax.Array:
    gate_BLF = dense(x_BLD, self.gate_kernel[...], 1)
    up_BLF = dense(x_BLD, self.up_kernel[...], 1)
    return dense(jax.nn.silu(gate_BLF) * up_BLF, self.down_kernel[...], 1)

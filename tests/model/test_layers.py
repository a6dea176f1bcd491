"""Layer building blocks against plain numpy."""

import chex
import jax.numpy as jnp
import numpy as np
from flax import nnx

from leap_jax.model import layers

RNG = np.random.RandomState(0)


def test_dense_contracts_leading_kernel_dims():
  x = RNG.randn(2, 3, 4, 5).astype(np.float32)
  kernel = RNG.randn(4, 5, 6).astype(np.float32)
  out = layers.dense(x, kernel, 2)
  chex.assert_shape(out, (2, 3, 6))
  np.testing.assert_allclose(out, np.einsum('btnh,nhd->btd', x, kernel),
                             rtol=1e-5, atol=1e-5)


def test_rms_norm():
  norm = layers.RMSNorm(8, 1e-6, 'float32', nnx.Rngs(0))
  norm.scale[...] = jnp.arange(8.0)
  x = RNG.randn(3, 8).astype(np.float32)
  expected = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * np.arange(8)
  np.testing.assert_allclose(norm(x), expected, rtol=1e-5)


def test_params_carry_logical_axes():
  from leap_jax.model.config import ModelConfig
  cfg = ModelConfig(vocab_size=16, embed_dim=8, num_layers=1, num_heads=2,
                    num_kv_heads=1, head_dim=4, mlp_dim=12, qkv_bias=True,
                    qk_norm=True)
  attn = layers.Attention(cfg, nnx.Rngs(0))
  axes = {path: var.get_metadata()['axes']
          for path, var in nnx.to_flat_state(nnx.state(attn))}
  assert axes[('q_kernel',)] == ('embed', 'heads', 'head_dim')
  assert axes[('k_bias',)] == ('kv_heads', 'head_dim')
  assert axes[('o_kernel',)] == ('heads', 'head_dim', 'embed')
  assert axes[('q_norm', 'scale')] == ('head_dim',)
  chex.assert_shape(attn.k_kernel[...], (8, 1, 4))

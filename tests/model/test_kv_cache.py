"""Decoding through the caches reproduces the full causal forward."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from leap_jax.model import kv_cache, transformer, weights
from tests.model.conftest import needs_cpu_kernels

forward = jax.jit(transformer.forward, static_argnums=0)


@pytest.mark.parametrize('cpu_kernels', [
    False, pytest.param(True, marks=needs_cpu_kernels)])
def test_shared_prefix_decode_equals_full_forward(tiny_dirs, cpu_kernels):
  """Prompts (left-padded) prefilled once, G continuations decoded step by
  step, must give the logits of running each whole sequence at once (with
  XLA's attention or cpu_decode's kernel)."""
  graphdef, state, cfg = weights.load(tiny_dirs['qwen2'])
  model = nnx.merge(graphdef, state)
  rng = np.random.RandomState(0)
  prompts = [rng.randint(0, 128, 5), rng.randint(0, 128, 8)]
  b, g, p, steps, s = 2, 3, 8, 4, 8
  tokens_BS = np.zeros((b, p), np.int32)
  valid_BS = np.zeros((b, p), bool)
  for i, pr in enumerate(prompts):
    tokens_BS[i, p - len(pr):], valid_BS[i, p - len(pr):] = pr, True
  positions_BS = np.maximum(np.cumsum(valid_BS, 1) - 1, 0)
  _, prompt_core = model(jnp.asarray(tokens_BS), jnp.asarray(positions_BS),
                         kv_cache.Causal(jnp.asarray(valid_BS), record=True))
  kv, h = cfg.num_kv_heads, cfg.head_dim
  gen_ks = tuple(jnp.zeros((b * g, kv, h, s)) for _ in range(cfg.num_layers))
  gen_vs = tuple(jnp.zeros((b * g, kv, s, h)) for _ in range(cfg.num_layers))
  core = kv_cache.SharedPrefix(prompt_core.ks, prompt_core.vs,
                               jnp.asarray(valid_BS), gen_ks, gen_vs, 0,
                               cpu_kernels)
  new_BS = rng.randint(0, 128, (b * g, steps)).astype(np.int32)
  lengths_B = np.repeat([len(pr) for pr in prompts], g)
  step_fn = jax.jit(lambda tok, pos, core: model(tok, pos, core))
  step_logits = []
  for step in range(steps):
    core = core.replace(step=jnp.int32(step))
    logits_B1V, core = step_fn(new_BS[:, step:step + 1],
                               (lengths_B + step)[:, None], core)
    step_logits.append(logits_B1V[:, 0])
  step_logits_BLV = np.stack(step_logits, 1)
  for x in range(b * g):
    # Causal: the whole sequence's last `steps` positions are the steps.
    seq = np.concatenate([prompts[x // g], new_BS[x]])
    full_1LV, _ = forward(graphdef, state, seq[None])
    np.testing.assert_allclose(step_logits_BLV[x], full_1LV[0, -steps:],
                               atol=2e-5)


def test_causal_records_every_layer(tiny_dirs):
  graphdef, state, cfg = weights.load(tiny_dirs['llama'])
  tokens = jnp.ones((2, 6), jnp.int32)
  _, core = forward(graphdef, state, tokens, None,
                    kv_cache.Causal(record=True))
  assert len(core.ks) == len(core.vs) == cfg.num_layers
  assert core.ks[0].shape == (2, cfg.num_kv_heads, cfg.head_dim, 6)
  assert core.vs[0].shape == (2, cfg.num_kv_heads, 6, cfg.head_dim)
  _, plain = forward(graphdef, state, tokens)
  assert plain.ks == ()


def test_cache_bytes_by_hand():
  from leap_jax.model.config import ModelConfig
  cfg = ModelConfig(vocab_size=10, embed_dim=8, num_layers=3, num_heads=4,
                    num_kv_heads=2, head_dim=16, mlp_dim=8, dtype='bfloat16')
  got = kv_cache.cache_bytes(cfg, prompts=8, samples=4, prompt_len=100,
                             new_tokens=32, devices=8)
  per_token = 2 * 3 * 2 * 16 * 2  # k and v, layers, kv heads, head dim, bf16
  assert got.prompt == 8 * 100 * per_token
  assert got.generated == 8 * 4 * 32 * per_token
  assert got.per_device == got.total // 8
  assert 'per device' in got.describe()

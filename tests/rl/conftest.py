"""Shared fixtures: a byte-level tokenizer, a tiny model, one kernel env."""

import pytest

from leap_jax.model.config import ModelConfig

TINY = ModelConfig(vocab_size=128, embed_dim=32, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=8, mlp_dim=64, max_position=8192)


class ByteTokenizer:
  """ASCII bytes as ids (vocab 128, non-ASCII -> '?'); no chat template."""
  chat_template = None

  def encode(self, text, add_special_tokens=True):
    del add_special_tokens
    return list(text.encode('ascii', 'replace'))

  def decode(self, ids, skip_special_tokens=True, **kw):
    del skip_special_tokens, kw
    return ''.join(chr(int(i)) for i in ids)


class ChatTokenizer(ByteTokenizer):
  """A tokenizer with a (toy) chat template, to test that path."""
  chat_template = 'toy'

  def apply_chat_template(self, messages, tokenize=False,
                          add_generation_prompt=True):
    assert not tokenize
    text = ''.join(f"[{m['role']}]{m['content']}[/]" for m in messages)
    return text + ('[assistant]' if add_generation_prompt else '')


@pytest.fixture
def byte_tokenizer():
  return ByteTokenizer()


@pytest.fixture(scope='session')
def kernel_env():
  from leap_jax.env import environment, pool
  env = environment.KernelEnv(environment.EnvConfig(
      pool=pool.PoolConfig(num_workers=2)))
  yield env
  env.close()

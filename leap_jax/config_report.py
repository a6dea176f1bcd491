"""The resolved config of a run: flattened, diffed, written to config.json.

At start the trainer prints the fields that differ from the variant's
defaults (one line each) and writes the whole config to
`workdir/config.json`, so two runs diff with any JSON tool. On resume the
saved config is compared field by field (`differences`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import ml_collections

CONFIG_FILE = "config.json"


def flatten(config: ml_collections.ConfigDict | Mapping[str, Any],
            prefix: str = "") -> dict[str, Any]:
  """{'rl.num_samples': 8, ...}: dotted paths to JSON values, in order."""
  if isinstance(config, ml_collections.ConfigDict):
    config = json.loads(config.to_json())
  out: dict[str, Any] = {}
  for key, value in config.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping):
      out.update(flatten(value, path + "."))
    else:
      out[path] = value
  return out


def differences(before: ml_collections.ConfigDict | Mapping[str, Any],
                after: ml_collections.ConfigDict | Mapping[str, Any],
                ) -> list[tuple[str, Any, Any]]:
  """(path, before, after) for every field whose value differs; a field
  only one side has shows None on the other."""
  a, b = flatten(before), flatten(after)
  return [(path, a.get(path), b.get(path))
          for path in list(a) + [p for p in b if p not in a]
          if a.get(path) != b.get(path)]


def change_lines(defaults: ml_collections.ConfigDict | Mapping[str, Any],
                 config: ml_collections.ConfigDict) -> list[str]:
  """'rl.num_samples = 4  (default 8)' per field changed against defaults."""
  return [f"{path} = {json.dumps(now)}  (default {json.dumps(default)})"
          for path, default, now in differences(defaults, config)]


def write(workdir: str | os.PathLike, config: ml_collections.ConfigDict) -> str:
  """workdir/config.json (atomically replaced); returns its path."""
  path = os.path.join(workdir, CONFIG_FILE)
  os.makedirs(workdir, exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.write(config.to_json(indent=2, sort_keys=True) + "\n")
  os.replace(tmp, path)
  return path

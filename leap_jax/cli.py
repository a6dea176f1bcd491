"""What the launch scripts share: one error path, quiet logging, paths.

Every launcher defines its config flag with `define_config` and starts
with `run(main, program)`: flags that do not parse (an unknown config
field, with the nearest valid one; a bad variant or config file; a value
of the wrong type; an unknown flag) end in one line `program: error: ...`
and exit status 2, before anything heavy starts; so do the user errors
main reports through `fail` or `user_errors`.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from absl import app, flags
import ml_collections
from ml_collections import config_flags


def fail(program: str, message: str) -> NoReturn:
  """Prints `program: error: message` on stderr and exits with status 2."""
  print(f"{program}: error: {one_line(message)}", file=sys.stderr)
  sys.exit(2)


def one_line(message: object) -> str:
  return "; ".join(s.strip() for s in str(message).strip().splitlines()
                   if s.strip())


@contextlib.contextmanager
def user_errors(program: str, *types: type[BaseException]) -> Iterator[None]:
  """Exceptions of `types` raised inside become `fail(program, str(e))`."""
  try:
    yield
  except types as e:  # pylint: disable=catching-non-exception
    fail(program, _unquote(str(e)))


def run(main: Callable[[list[str]], None], program: str) -> None:
  """absl's app.run with flag errors reported as one line (see above)."""
  app.run(main, flags_parser=lambda argv: parse_flags(program, argv))


def parse_flags(program: str, argv: Sequence[str],
                flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
  """flag_values(argv), or `fail` with what is wrong."""
  specs = {name: _unquote(flag_values[name].default_as_str or "")
           for name in _config_flag_names(flag_values)}
  try:
    rest = flag_values(list(argv))
    for name in specs:
      # A config file that fails to load parses as an object that raises
      # on first use: use it now.
      flag_values[name].value.to_dict()
    return rest
  except Exception as e:  # pylint: disable=broad-except
    fail(program, config_problem(argv, specs) or
         _unquote(str(e)).replace("\nPass --helpshort", ""))


# configs/leap.py: next to the package, in a checkout and installed alike.
DEFAULT_CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs",
    "leap.py")


def define_config(program: str, help_string: str,
                  default: str = DEFAULT_CONFIG, name: str = "config") -> Any:
  """config_flags.DEFINE_config_file, whose default is parsed (overrides
  from sys.argv applied) right here, at the launcher's import: a bad
  override fails here, as one line."""
  try:
    return config_flags.DEFINE_config_file(name, default, help_string)
  except Exception as e:  # pylint: disable=broad-except
    fail(program, config_problem(sys.argv, {name: default}) or one_line(e))


def _unquote(text: str) -> str:
  """'x' -> x (a KeyError's message comes quoted)."""
  if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
    return text[1:-1]
  return text


def _config_flag_names(flag_values: flags.FlagValues) -> list[str]:
  # ml_collections' config flags are the ones with a config file name.
  return [name for name in flag_values
          if hasattr(type(flag_values[name]), "config_filename")]


def _file_arg(argv: Sequence[str], name: str, default: str) -> str:
  for i, arg in enumerate(argv):
    if arg.startswith(f"--{name}="):
      return arg.split("=", 1)[1]
    if arg == f"--{name}" and i + 1 < len(argv):
      return argv[i + 1]
  return default


def load_config_file(spec: str) -> ml_collections.ConfigDict:
  """`path[:variant]` -> the file's get_config(variant) (or get_config())."""
  path, _, variant = spec.partition(":")
  if not os.path.isfile(path):
    raise ValueError(f"config file {path!r} not found")
  module_spec = importlib.util.spec_from_file_location("_leap_jax_config", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(variant) if variant else module.get_config()


def config_problem(argv: Sequence[str], specs: dict[str, str]) -> str | None:
  """What is wrong with the config flags of argv (specs: each config
  flag's default `file[:variant]`), in one sentence: the config file or
  variant, or the first overridden field that does not exist (with the
  nearest that does); None if neither."""
  for name, default in specs.items():
    spec = _unquote(_file_arg(argv, name, default))
    try:
      config = load_config_file(spec)
    except Exception as e:  # pylint: disable=broad-except
      return f"--{name}={spec}: {one_line(e)}"
    fields = list(_flat_names(config))
    for arg in argv:
      for prefix in (f"--{name}.", f"--no{name}."):
        if arg.startswith(prefix):
          field = arg[len(prefix):].split("=", 1)[0]
          if field not in fields:
            return (f"unknown config field {field!r} (nearest: "
                    f"{nearest(field, fields)}); --helpfull lists them")
  return None


def _flat_names(config: ml_collections.ConfigDict, prefix: str = ""):
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      yield from _flat_names(value, f"{prefix}{key}.")
    else:
      yield f"{prefix}{key}"


def nearest(name: str, candidates: Sequence[str]) -> str:
  """The candidate closest to name: first among those in the same block
  (rl.bogus -> an rl field), by difflib's ratio."""
  block = name.rpartition(".")[0]
  same = [c for c in candidates if c.rpartition(".")[0] == block] or candidates
  leaf = name.rpartition(".")[2]
  return max(same, key=lambda c: (
      difflib.SequenceMatcher(None, leaf, c.rpartition(".")[2]).ratio(),
      difflib.SequenceMatcher(None, name, c).ratio()))


def config_defaults(flag_name: str = "config",
                    flag_values: flags.FlagValues = flags.FLAGS
                    ) -> ml_collections.ConfigDict:
  """The parsed config flag's file and variant without the overrides."""
  flag = flag_values[flag_name]
  return load_config_file(config_flags.get_config_filename(flag))


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

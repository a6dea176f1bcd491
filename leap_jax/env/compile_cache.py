"""The warm-up's compiled programs, compiled once per pool instead of once per
worker.

Every worker compiles the same few harness programs while it warms up (an
interpret-mode kernel, an exported call): about 0.15 s of each worker's
start-up. A *warmer* (a worker forked from the zygote that takes no job, so
it never runs candidate code) compiles them with jax's persistent cache
writing into its private scratch, and sends the entries to the pool
(`collect`). The pool checks them (`validate`) and hands them to the zygote
in a memfd; the zygote keeps the bytes in memory (`keep`), so every later
fork holds a pristine copy. Such a worker writes its copy into its own
scratch (`stage`), warms up with the cache on, read only (`enable`), then
switches the cache off and deletes the copy (`disable`) before it takes a
job: a candidate's own programs are never read from or written to a cache,
and no worker can change what another one loads.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

import numpy as np

from leap_jax.env import wire

MAX_TOTAL_BYTES = 64 << 20
MAX_ENTRIES = 64
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,200}")
_DIRNAME = ".compile_cache"
_SETTINGS = ("jax_compilation_cache_dir",
             "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes",
             "jax_persistent_cache_enable_xla_caches")

_BLOB: list[bytes] = []      # the zygote's copy (then every fork's)
_SAVED: dict[str, Any] = {}  # settings before enable(), for disable()


class CacheError(ValueError):
  """A warmer's entries that the pool will not pass on."""


# --- the warmer and the pool ---------------------------------------------

def cache_dir(scratch: str) -> str:
  return os.path.join(scratch, _DIRNAME)


def collect(directory: str) -> tuple[dict[str, Any], list[np.ndarray]]:
  """The entries a warmer compiled, as a worker message."""
  names = sorted(os.listdir(directory))
  arrays = []
  for name in names:
    with open(os.path.join(directory, name), "rb") as f:
      arrays.append(np.frombuffer(f.read(), np.uint8))
  return {"kind": "compile_cache", "names": names}, arrays


def validate(header: dict[str, Any], arrays: list[np.ndarray]) -> bytes:
  """The warmer's message, checked and re-encoded for the zygote."""
  names = header.get("names")
  if (header.get("kind") != "compile_cache" or not isinstance(names, list)
      or len(names) != len(arrays) or len(names) > MAX_ENTRIES):
    raise CacheError("not a compile-cache message")
  for name, array in zip(names, arrays):
    if (not isinstance(name, str) or not _NAME.fullmatch(name)
        or name.startswith(".") or array.dtype != np.uint8 or array.ndim != 1):
      raise CacheError(f"bad cache entry {name!r}")
  if len(set(names)) != len(names):
    raise CacheError("repeated cache entry")
  if sum(a.nbytes for a in arrays) > MAX_TOTAL_BYTES:
    raise CacheError("cache entries over the size cap")
  return wire.encode({"kind": "compile_cache", "names": names}, arrays)


def to_memfd(blob: bytes) -> int:
  fd = os.memfd_create("leap-compile-cache", os.MFD_CLOEXEC)
  os.write(fd, blob)
  return fd


# --- the zygote ------------------------------------------------------------

def keep(fd: int) -> None:
  """The zygote: the blob in the memfd, kept for every later fork."""
  size = os.fstat(fd).st_size
  blob = (os.pread(fd, size, 0)
          if size <= wire.message_cap(MAX_TOTAL_BYTES) else b"")
  os.close(fd)
  _BLOB[:] = [blob] if blob else []


# --- a worker ----------------------------------------------------------------

def stage(scratch: str) -> str | None:
  """This worker's copy of the entries in its scratch; None without any."""
  if not _BLOB:
    return None
  header, arrays = wire.decode(_BLOB[0], frozenset({"uint8"}))
  directory = cache_dir(scratch)
  os.makedirs(directory, exist_ok=True)
  for name, array in zip(header["names"], arrays):
    with open(os.path.join(directory, name), "wb") as f:
      f.write(array.tobytes())
  return directory


def enable(directory: str, fill: bool) -> None:
  """jax's persistent cache at `directory`: written (a warmer) or read only
  (a miss never writes: its compile would have to beat a year)."""
  import jax  # noqa: PLC0415
  os.makedirs(directory, exist_ok=True)
  for name in _SETTINGS:
    _SAVED[name] = getattr(jax.config, name)
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs",
                    0.0 if fill else 3.2e7)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
  jax.config.update("jax_persistent_cache_enable_xla_caches", "none")


def disable(directory: str | None, keep_files: bool = False) -> None:
  """The cache off, its settings as they were, the staged copy deleted."""
  import jax  # noqa: PLC0415
  from jax._src import compilation_cache  # noqa: PLC0415
  from jax._src import xla_bridge  # noqa: PLC0415
  for name, value in _SAVED.items():
    jax.config.update(name, value)
  _SAVED.clear()
  # reset_cache also clears the flags jax sets at a process's first compile;
  # asking again sets them as a worker without a cache has them (the state
  # guard compares against that).
  compilation_cache.reset_cache()
  compilation_cache.is_cache_used(xla_bridge.get_backend())
  if directory and not keep_files:
    shutil.rmtree(directory, ignore_errors=True)

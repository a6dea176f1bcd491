"""Messages between the pool and a worker.

Pool -> worker: pickled job dicts (trusted direction). Worker -> pool: a JSON
header plus raw array bytes, never pickle, since the worker runs untrusted
code; the pool checks every size against what it expects.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
import numpy as np

MAX_HEADER_BYTES = 1 << 20
_LEN = struct.Struct("<I")


def message_cap(array_bytes: int) -> int:
  """Longest message allowed when the arrays in it total `array_bytes`."""
  return _LEN.size + MAX_HEADER_BYTES + array_bytes


def encode(header: dict[str, Any], arrays: list[np.ndarray] = ()) -> bytes:
  """One message: header length, JSON header, then the arrays' bytes."""
  # ascontiguousarray would turn 0-d arrays into 1-d ones
  arrays = [np.array(a, order="C", copy=None) for a in arrays]
  header = dict(header, arrays=[[list(a.shape), a.dtype.name] for a in arrays])
  blob = json.dumps(header).encode()
  return b"".join([_LEN.pack(len(blob)), blob] + [a.tobytes() for a in arrays])


class WireError(ValueError):
  """A malformed message from a worker."""


def decode(message: bytes, allowed_dtypes: frozenset[str]
           ) -> tuple[dict[str, Any], list[np.ndarray]]:
  """Parses a worker message; raises WireError on anything malformed."""
  if len(message) < _LEN.size:
    raise WireError("short message")
  (n,) = _LEN.unpack_from(message)
  if n > MAX_HEADER_BYTES or _LEN.size + n > len(message):
    raise WireError("bad header length")
  try:
    header = json.loads(message[_LEN.size:_LEN.size + n])
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise WireError(f"bad header: {e}") from None
  if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
    raise WireError("header is not a message")
  arrays, offset = [], _LEN.size + n
  for spec in header["arrays"]:
    try:
      shape, dtype_name = spec
      shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
      raise WireError("bad array spec") from None
    if dtype_name not in allowed_dtypes or any(d < 0 for d in shape):
      raise WireError(f"bad array spec {spec!r}")
    dtype = np.dtype(dtype_name)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if offset + size > len(message):
      raise WireError("truncated array")
    arrays.append(np.frombuffer(message, dtype, int(np.prod(shape, dtype=np.int64)),
                                offset).reshape(shape))
    offset += size
  if offset != len(message):
    raise WireError("trailing bytes")
  return header, arrays

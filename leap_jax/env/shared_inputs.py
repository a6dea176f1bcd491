"""Trial inputs handed to workers as sealed memfds instead of pickled copies.

One `run` of the pool shares each set of trial inputs (a task's, in one
evaluate call) with every worker that checks a candidate for it: the arrays
are written once into a memfd that is then sealed (no write, grow, shrink or
new seals: neither the pool nor any worker, native code included, can change
it), and each worker maps it read-only. No candidate can pass anything to
another through it, and a job's message shrinks to the source and a layout.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
from typing import Any

import numpy as np

_SEALS = (fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
          | fcntl.F_SEAL_WRITE)
_ALIGN = 64


def _sealed_memfd(arrays: list[np.ndarray]) -> tuple[int, list[int]]:
  """A sealed memfd holding the arrays back to back; their offsets."""
  offsets, size = [], 0
  for a in arrays:
    offsets.append(size)
    size += -(-a.nbytes // _ALIGN) * _ALIGN
  fd = os.memfd_create("leap-trial-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
  try:
    os.ftruncate(fd, max(size, 1))
    with mmap.mmap(fd, max(size, 1)) as view:
      for a, offset in zip(arrays, offsets):
        view[offset:offset + a.nbytes] = np.ascontiguousarray(a).tobytes()
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
  except BaseException:
    os.close(fd)
    raise
  return fd, offsets


class SharedInputs:
  """The memfds of one pool run, by trial-input list; closed at the end."""

  def __init__(self):
    self._shared: dict[int, tuple[Any, int, list]] = {}  # id -> (obj, fd, layout)

  def pack(self, job: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """The job with its trial inputs replaced by a layout, and the fd."""
    trials = job.get("trial_inputs")
    if not trials:
      return job, []
    entry = self._shared.get(id(trials))
    if entry is None or entry[0] is not trials:
      arrays = [np.asarray(a) for trial in trials for a in trial]
      fd, offsets = _sealed_memfd(arrays)
      it = iter(zip(arrays, offsets))
      layout = [[(o, list(a.shape), a.dtype.name) for a, o in
                 (next(it) for _ in trial)] for trial in trials]
      entry = self._shared[id(trials)] = (trials, fd, layout)  # keeps the id
    _, fd, layout = entry
    return {**job, "trial_inputs": None, "shared_inputs": layout}, [fd]

  def close(self) -> None:
    for _, fd, _ in self._shared.values():
      os.close(fd)
    self._shared.clear()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def send_job(conn, job: dict[str, Any], fds: list[int]) -> None:
  """The job on a multiprocessing Connection over a Unix socket; the fds
  ride on a one-byte message before it."""
  conn.send({"fds": len(fds)})
  if fds:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM,
                       fileno=os.dup(conn.fileno())) as sock:
      socket.send_fds(sock, [b"F"], fds)
  conn.send(job)


def receive_job(conn, dtype=np.dtype) -> dict[str, Any]:
  """send_job's other end: the job with its trial inputs mapped read-only."""
  count = conn.recv()["fds"]
  fds = []
  if count:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM,
                       fileno=os.dup(conn.fileno())) as sock:
      _, fds, _, _ = socket.recv_fds(sock, 1, count)
  job = conn.recv()
  layout = job.pop("shared_inputs", None)
  if layout is not None:
    (fd,) = fds
    view = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
    os.close(fd)
    job["trial_inputs"] = [tuple(_array(view, o, s, dtype(d))
                                 for o, s, d in trial) for trial in layout]
  return job


def _array(view, offset: int, shape: list[int], dtype) -> np.ndarray:
  count = int(np.prod(shape, dtype=np.int64))
  if count == 0:
    empty = np.empty(shape, dtype)
    empty.flags.writeable = False
    return empty
  return np.frombuffer(view, dtype, count, offset).reshape(shape)

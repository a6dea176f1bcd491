"""Trial inputs through sealed memfds: equal arrays, one fd per input set,
and nobody (the pool, a worker, native code) can change them."""

import errno
import mmap
import os
import socket
from multiprocessing.connection import Connection

import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.env import shared_inputs


def _trials():
  rng = np.random.default_rng(0)
  return [(rng.standard_normal((5, 3)).astype(np.float32),
           np.arange(7, dtype=np.int32),
           np.asarray(rng.standard_normal(4), dtype=jnp.bfloat16),
           np.zeros((0, 2), np.float32)) for _ in range(2)]


def test_a_job_round_trip_through_a_forked_process():
  trials = _trials()
  ours, theirs = socket.socketpair()
  parent, child = Connection(ours.detach()), Connection(theirs.detach())
  with shared_inputs.SharedInputs() as shared:
    job, fds = shared.pack({"source": "s", "trial_inputs": trials})
    assert job["trial_inputs"] is None and len(fds) == 1
    pid = os.fork()
    if pid == 0:  # the worker's side: map, then send back what it saw
      got = shared_inputs.receive_job(child, jnp.dtype)
      flat = [a for trial in got["trial_inputs"] for a in trial]
      child.send([(a.tolist(), a.dtype.name, a.flags.writeable) for a in flat])
      os._exit(0)
    shared_inputs.send_job(parent, job, fds)
    seen = parent.recv()
    os.waitpid(pid, 0)
  want = [a for trial in trials for a in trial]
  assert [(np.asarray(a).tolist(), a.dtype.name) for a in want] == [
      (v, d) for v, d, _ in seen]
  assert not any(writeable for _, _, writeable in seen)  # read-only views


def test_one_memfd_per_input_set_and_it_is_sealed():
  trials, other = _trials(), _trials()
  with shared_inputs.SharedInputs() as shared:
    (_, (fd_a,)), (_, (fd_b,)) = shared.pack({"trial_inputs": trials}), (
        shared.pack({"trial_inputs": trials}))
    _, (fd_c,) = shared.pack({"trial_inputs": other})
    assert fd_a == fd_b != fd_c
    with pytest.raises(OSError) as write:
      os.pwrite(fd_a, b"x", 0)
    assert write.value.errno == errno.EPERM
    with pytest.raises(OSError):
      os.ftruncate(fd_a, 1 << 20)
    with pytest.raises(PermissionError):
      mmap.mmap(fd_a, os.fstat(fd_a).st_size, flags=mmap.MAP_SHARED,
                prot=mmap.PROT_READ | mmap.PROT_WRITE)
  with pytest.raises(OSError):
    os.fstat(fd_a)  # closed with the run


def test_jobs_without_inputs_pass_as_they_are():
  with shared_inputs.SharedInputs() as shared:
    job = {"source": "s", "trial_inputs": []}
    assert shared.pack(job) == (job, [])

"""distributed.py in one process (tests/launch/test_train.py runs two)."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from leap_jax import distributed
from leap_jax.model import sharding


@pytest.mark.parametrize("environ, want", [
    ({}, None),
    ({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}, None),
    ({"SLURM_NTASKS": "4", "SLURM_PROCID": "2"}, "slurm"),
    ({"SLURM_NTASKS": "4"}, None),  # an allocation, not a task of it
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "openmpi"),
])
def test_cluster_from_env(environ, want):
  assert distributed.cluster_from_env(environ) == want


def test_initialize_needs_all_three_flags_or_none():
  assert distributed.initialize(environ={}) is False  # one process
  with pytest.raises(ValueError, match="go together"):
    distributed.initialize("localhost:1234", None, None, environ={})
  with pytest.raises(ValueError, match=r"process_id must be in \[0, 2\)"):
    distributed.initialize("localhost:1234", 2, 2, environ={})


@pytest.mark.parametrize("mesh_devices, verify, gpus, want", [
    ("", "", 8, None),            # all GPUs train; workers share them
    ("0,1", "7", 8, "0,1"),       # explicit choice wins
    ("", "6, 7", 8, "0,1,2,3,4,5"),
    ("", "0", 1, None),           # the only GPU verifies: share it
])
def test_training_gpus(mesh_devices, verify, gpus, want):
  assert distributed.training_gpus(mesh_devices, verify, gpus) == want


def test_one_process_helpers_are_plain():
  assert distributed.allgather_bytes(b"abc") == [b"abc"]
  distributed.barrier("nothing to wait for")
  mesh = sharding.make_mesh(data=1, fsdp=-1, tensor=1)
  host = np.arange(12, dtype=np.float32).reshape(4, 3)
  x = distributed.place(host, NamedSharding(mesh, P("fsdp")))
  assert isinstance(x, jax.Array) and x.sharding.spec == P("fsdp")
  np.testing.assert_array_equal(distributed.to_host(x), host)
  tree = {"a": x, "b": np.ones(2, np.float32)}
  assert distributed.digest(tree) == distributed.digest(
      {"a": host, "b": np.ones(2, np.float32)})
  assert distributed.digest(tree) != distributed.digest(
      {"a": host + 1, "b": np.ones(2, np.float32)})
  copy = distributed.local_copy({"a": x}, {"a": NamedSharding(mesh, P())})
  assert copy["a"].sharding.spec == P()
  np.testing.assert_array_equal(np.asarray(copy["a"]), host)


def test_any_process_in_one_process_is_the_flag():
  assert distributed.any_process(True) is True
  assert distributed.any_process(False) is False


def _fake_mesh(platform, n):
  device = type("Device", (), {"platform": platform})()
  return type("Mesh", (), {"devices": np.array([device] * n)})()


@pytest.mark.parametrize("mesh, want", [
    (None, False),
    (_fake_mesh("cpu", 1), False),
    (_fake_mesh("cpu", 8), True),    # XLA:CPU: one thread pool for all
    (_fake_mesh("gpu", 8), False),   # a stream per device: stay async
])
def test_one_program_at_a_time_only_on_several_cpu_devices(mesh, want):
  assert distributed.one_program_at_a_time(mesh) is want


def test_settle_waits_only_when_asked(monkeypatch):
  waited = []
  monkeypatch.setattr(jax, "block_until_ready",
                      lambda tree: waited.append(tree) or tree)
  tree = {"a": jax.numpy.ones(3)}
  assert distributed.settle(tree, False) is tree and not waited
  assert distributed.settle(tree, True) is tree and waited == [tree]

"""Multi-process runs through jax.distributed (one controller per host).

Every process runs the same program: it samples and verifies its own share
of the prompts, then the shares are gathered (`allgather_bytes`) so that
every process computes the same rewards and builds the same global batch.
Arrays for the sharded update are placed with `place` (each process fills
only the shards its devices hold); `local_copy` turns the globally sharded
parameters into a copy on this host's devices for its sampler.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

_LOG = logging.getLogger(__name__)
BARRIER_TIMEOUT_S = 4 * 3600  # a warm start on one host may take long


def cluster_from_env(environ: Mapping[str, str] = os.environ) -> str | None:
  """'slurm' or 'openmpi' when launched by one with more than one task."""
  if int(environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in environ:
    return "slurm"
  if int(environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
    return "openmpi"
  return None


def initialize(coordinator_address: str | None = None,
               num_processes: int | None = None,
               process_id: int | None = None,
               environ: Mapping[str, str] = os.environ) -> bool:
  """Starts jax.distributed when asked to (flags) or launched by SLURM /
  Open MPI; returns whether it did. Must run before JAX touches a device.

  With flags, all three are needed; without, jax reads the cluster's
  variables (SLURM_*, OMPI_*) itself.
  """
  given = [coordinator_address, num_processes, process_id]
  if any(v is not None for v in given) and not all(v is not None for v in given):
    raise ValueError("--coordinator_address, --num_processes and --process_id "
                     "go together: give all three or none")
  if process_id is not None and not 0 <= process_id < num_processes:
    raise ValueError(f"--process_id must be in [0, {num_processes}), "
                     f"got {process_id}")
  cluster = cluster_from_env(environ)
  if coordinator_address is None and cluster is None:
    return False
  # CPU devices of different processes talk through gloo (GPUs use NCCL).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if coordinator_address is None:
    _LOG.info("jax.distributed from the %s environment", cluster)
    jax.distributed.initialize()
  else:
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
  return True


def is_multiprocess() -> bool:
  return jax.process_count() > 1


def barrier(name: str, timeout_s: float = BARRIER_TIMEOUT_S) -> None:
  """Waits until every process reaches `name` (no-op in one process)."""
  if not is_multiprocess():
    return
  from jax._src import distributed as jax_distributed  # pylint: disable=g-import-not-at-top
  jax_distributed.global_state.client.wait_at_barrier(name,
                                                      int(timeout_s * 1000))


def allgather_bytes(payload: bytes) -> list[bytes]:
  """Every process's payload, in process order."""
  if not is_multiprocess():
    return [payload]
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  sizes = multihost_utils.process_allgather(np.array([len(payload)], np.int64))
  sizes = np.asarray(sizes).reshape(-1)
  buf = np.zeros((int(sizes.max()),), np.uint8)
  buf[:len(payload)] = np.frombuffer(payload, np.uint8)
  rows = np.asarray(multihost_utils.process_allgather(buf)).reshape(
      len(sizes), -1)
  return [rows[i, :n].tobytes() for i, n in enumerate(sizes)]


def any_process(flag: bool) -> bool:
  """True on every process iff `flag` is true on at least one (all of them
  must call it at the same point: it is a collective)."""
  if not is_multiprocess():
    return bool(flag)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  flags = multihost_utils.process_allgather(np.array([int(flag)], np.int32))
  return bool(np.asarray(flags).any())


def one_program_at_a_time(mesh: jax.sharding.Mesh | None) -> bool:
  """Whether sharded programs on `mesh` must not overlap: XLA:CPU runs every
  device's part of a program on one shared thread pool, and two programs
  with collectives in flight can each hold threads the other's rendezvous
  waits for (a deadlock seen with 8 forced host devices). GPUs have a
  stream per device: there, programs stay asynchronous."""
  return (mesh is not None and mesh.devices.size > 1
          and mesh.devices.flat[0].platform == "cpu")


def settle(tree: Any, serialize: bool) -> Any:
  """tree, finished first when `serialize` (one_program_at_a_time)."""
  return jax.block_until_ready(tree) if serialize else tree


def place(host: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
  """A global array from a host array every process holds identically."""
  host = np.asarray(host)
  return jax.make_array_from_callback(host.shape, sharding,
                                      lambda index: host[index])


def map_with_shardings(fn, tree: Any, shardings: Any) -> Any:
  """fn(leaf, sharding) over a tree whose shardings tree is a prefix of it
  (as state_shardings gives one sharding per nnx.Variable)."""
  return jax.tree.map(
      lambda s, sub: jax.tree.map(lambda x: fn(x, s), sub), shardings, tree)


def place_tree(tree: Any, shardings: Any) -> Any:
  return map_with_shardings(place, tree, shardings)


def _whole_on_local_device(x: jax.Array) -> jax.Array:
  """x's whole value on one of this host's devices (x spans processes)."""
  replicated = jax.jit(lambda a: a, out_shardings=NamedSharding(
      x.sharding.mesh, PartitionSpec()))(x)
  return replicated.addressable_data(0)


def to_host(x: jax.Array) -> np.ndarray:
  """The whole value of a (possibly multi-process) array, on every host."""
  if getattr(x, "is_fully_addressable", True):
    return np.asarray(x)
  return np.asarray(_whole_on_local_device(x))


def digest(tree: Any) -> str:
  """sha256 of a tree's whole values (gathered where they span processes):
  equal on every process iff their copies agree."""
  h = hashlib.sha256()
  for leaf in jax.tree.leaves(tree):
    h.update(np.ascontiguousarray(to_host(leaf)).tobytes())
  return h.hexdigest()[:16]


def local_copy(tree: Any, shardings: Any) -> Any:
  """The tree placed on this host's `shardings` (over its local devices).

  In one process this is a reshard (a no-op when the shardings agree);
  across processes each parameter is first replicated over the mesh, then
  this host's copy is laid out on its own devices. That costs one full
  copy per device for a moment: fine for policies that fit a device.
  """

  def one(x, sharding):
    serialize = one_program_at_a_time(
        getattr(getattr(x, "sharding", None), "mesh", None))
    if not getattr(x, "is_fully_addressable", True):
      x = settle(_whole_on_local_device(x), serialize)
    return settle(jax.device_put(x, sharding), serialize)

  return map_with_shardings(one, tree, shardings)


def _ids(text: str) -> list[str]:
  return [d.strip() for d in str(text).split(",") if d.strip()]


def training_gpus(mesh_devices: str, verify_devices: str,
                  num_gpus: int) -> str | None:
  """The local GPU ids this process may use ('0,1,...'), or None for all.

  mesh.devices when given; else every GPU not set aside for verification
  (env.verify_devices), so the trainer never preallocates on a worker's
  GPU. A host whose every GPU verifies shares them (None).
  """
  if _ids(mesh_devices):
    return ",".join(_ids(mesh_devices))
  verify = set(_ids(verify_devices))
  if not verify:
    return None
  train = [str(i) for i in range(num_gpus) if str(i) not in verify]
  return ",".join(train) or None


def _count_gpus() -> int:
  try:
    return len(os.listdir("/proc/driver/nvidia/gpus"))
  except OSError:
    return 0


def restrict_training_devices(config: Any) -> str | None:
  """Applies training_gpus before JAX starts its GPU backend."""
  visible = training_gpus(config.mesh.devices, config.env.verify_devices,
                          _count_gpus())
  if visible is not None:
    jax.config.update("jax_cuda_visible_devices", visible)
  return visible

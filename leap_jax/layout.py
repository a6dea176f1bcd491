"""Where a run's arrays live: the training mesh over every process's
devices, each host's sampling mesh, the sharding rules (config data), and
replicated placement for leaves jit leaves on one device."""

from __future__ import annotations

from typing import Any

import jax
import ml_collections
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from leap_jax import distributed
from leap_jax.model import sharding, transformer
from leap_jax.model.config import ModelConfig


def rules(config: ml_collections.ConfigDict) -> sharding.Rules:
  """config.sharding_rules as sharding.Rules (JSON turns tuples to lists)."""
  return tuple((name, tuple(axes) if isinstance(axes, (list, tuple)) else axes)
               for name, axes in config.sharding_rules)


def training_mesh(config: ml_collections.ConfigDict) -> Mesh:
  """(data, fsdp, tensor) over every process's devices (config.mesh)."""
  m = config.mesh
  return sharding.make_mesh(data=m.data, fsdp=m.fsdp, tensor=m.tensor)


def sampling_mesh(config: ml_collections.ConfigDict) -> Mesh:
  """This host's devices only: tensor-parallel as in training where that
  divides them, the rest fsdp. Sampling never waits on another host."""
  devices = jax.local_devices()
  tensor = config.mesh.tensor
  if tensor < 1 or len(devices) % tensor:
    tensor = 1
  return sharding.make_mesh(data=1, fsdp=-1, tensor=tensor, devices=devices)


def param_shardings(model_cfg: ModelConfig, mesh: Mesh,
                    config: ml_collections.ConfigDict) -> Any:
  """One NamedSharding per parameter, from its logical axes and the rules."""
  abstract = transformer.abstract_model(model_cfg)[1]
  return sharding.state_shardings(abstract, mesh, rules(config))


def on_mesh(tree: Any, mesh: Mesh) -> Any:
  """Leaves (arrays or shapes) that jit left on one device, replicated over
  the mesh instead: multi-process checkpoints need every array global."""
  replicated = NamedSharding(mesh, PartitionSpec())

  def fix(x):
    if isinstance(getattr(x, "sharding", None), NamedSharding):
      return x
    if isinstance(x, jax.ShapeDtypeStruct):
      return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated)
    return distributed.place(np.asarray(x), replicated)

  return jax.tree.map(fix, tree)

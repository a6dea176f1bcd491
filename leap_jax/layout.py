"""Where a run's arrays live: the training mesh over every process's
devices, each host's sampling mesh, the sharding rules (config data), the
params laid out on the mesh, and replicated placement for leaves jit
leaves on one device."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
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


def opt_state_shardings(optimizer: Any, params: Any, mesh: Mesh) -> Any:
  """Shardings of optimizer.init(params): every subtree shaped like the
  params (Adam moments, an f32 master copy) is laid out as the params are,
  other leaves (step counts) are replicated. Left to jit, the moments'
  zeros come out replicated: a whole optimizer state per device."""
  abstract = jax.eval_shape(optimizer.init, params)
  like = jax.tree.map(lambda x: x.sharding, params)
  params_def = jax.tree.structure(params)
  replicated = NamedSharding(mesh, PartitionSpec())
  is_params = lambda x: jax.tree.structure(x) == params_def
  return jax.tree.map(lambda x: like if is_params(x) else replicated,
                      abstract, is_leaf=is_params)


def init_opt_state(optimizer: Any, params: Any, mesh: Mesh) -> Any:
  """optimizer.init(params), laid out by opt_state_shardings."""
  shardings = opt_state_shardings(optimizer, params, mesh)
  return jax.jit(optimizer.init, out_shardings=shardings)(params)


def abstract_opt_state(optimizer: Any, params: Any, mesh: Mesh) -> Any:
  """Shapes and shardings of init_opt_state's result (for a restore)."""
  return jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      jax.eval_shape(optimizer.init, params),
      opt_state_shardings(optimizer, params, mesh))


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


def place_params(params: Any, shardings: Any, copy: bool = False) -> Any:
  """params laid out with `shardings` (one per nnx.Variable, as
  param_shardings gives them).

  Leaves already laid out so (a checkpoint loaded onto the training mesh)
  are kept as they are, or copied if `copy` (a reference the update must
  not donate away); a process's host-local copy (the embedded warm start,
  read by each process alone) is placed from its values; anything else is
  resharded on device, never through one host whole.
  """

  def one(x, sharding):
    if getattr(x, "sharding", None) == sharding:
      return jnp.copy(x) if copy else x
    if jax.process_count() > 1 and getattr(x, "is_fully_addressable", True):
      return distributed.place(np.asarray(x), sharding)
    return jax.device_put(x, sharding)

  return distributed.map_with_shardings(one, params, shardings)

"""Logical axis names -> mesh axes, as config data.

Parameters name their axes ('embed', 'mlp', 'heads', ...); a rules tuple of
(logical_name, mesh_axis or tuple of mesh axes) pairs says where each goes.
Names without a rule, and mesh axes that do not divide a dimension, stay
replicated, so one rule set serves every model size and mesh. 'layers' (the
stacked layers' leading dim) has no rule: every device holds its slice of
every layer. Inside jitted code, `constrain_rows` pins activations' leading
dim to the batch rule (so the compiler shards the batch and gathers
weights, FSDP, rather than the reverse) and `constrain_state` pins
gradients to the params' layout.
"""

import dataclasses

from typing import Any, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ('data', 'fsdp', 'tensor')
Rules = tuple[tuple[str, str | tuple[str, ...]], ...]

DEFAULT_RULES: Rules = (
    ('batch', ('data', 'fsdp')),
    ('embed', 'fsdp'),
    ('mlp', 'tensor'),
    ('heads', 'tensor'),
    ('kv_heads', 'tensor'),
    ('vocab', 'tensor'),
    ('layers', ()),  # stacked layers: replicated, each device its slices
)


def make_mesh(data: int = 1, fsdp: int = -1, tensor: int = 1,
              devices: Sequence[Any] | None = None) -> Mesh:
  """A (data, fsdp, tensor) mesh; -1 takes the devices the others leave."""
  devices = list(jax.devices() if devices is None else devices)
  sizes = [data, fsdp, tensor]
  known = int(np.prod([s for s in sizes if s != -1]))
  sizes = [len(devices) // known if s == -1 else s for s in sizes]
  if int(np.prod(sizes)) != len(devices):
    raise ValueError(f'mesh {dict(zip(MESH_AXES, sizes))} does not cover '
                     f'{len(devices)} devices')
  return jax.make_mesh(tuple(sizes), MESH_AXES,
                       axis_types=(jax.sharding.AxisType.Auto,) * 3,
                       devices=devices)


def logical_to_spec(axes: Sequence[str | None], shape: Sequence[int],
                    mesh: Mesh, rules: Rules = DEFAULT_RULES) -> PartitionSpec:
  """PartitionSpec for a tensor whose dims carry logical names `axes`."""
  table = dict(rules)
  used: set[str] = set()
  spec = []
  for name, dim in zip(axes, shape):
    targets = table.get(name, ())
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    chosen = []
    for axis in targets:
      size = mesh.shape.get(axis, 1)
      if size == 1 or axis in used:
        continue
      if dim % (size * int(np.prod([mesh.shape[a] for a in chosen]))):
        continue  # uneven split: keep this dim replicated over that axis
      chosen.append(axis)
    used.update(chosen)
    spec.append(None if not chosen else
                chosen[0] if len(chosen) == 1 else tuple(chosen))
  return PartitionSpec(*spec)


@dataclasses.dataclass(frozen=True)
class MeshRules:
  """A mesh and the rules: what jitted model code needs to pin layouts
  inside a program. Hashable, so jitted functions take it static."""
  mesh: Mesh
  rules: Rules = DEFAULT_RULES


def constrain_rows(x: jax.Array, mesh_rules: MeshRules | None) -> jax.Array:
  """x with its leading dim (rows) split as the rules split 'batch'; as is
  without a mesh."""
  if mesh_rules is None or mesh_rules.mesh.size == 1:
    return x
  names = ('batch',) + (None,) * (x.ndim - 1)
  spec = logical_to_spec(names, x.shape, mesh_rules.mesh, mesh_rules.rules)
  return jax.lax.with_sharding_constraint(
      x, NamedSharding(mesh_rules.mesh, spec))


def constrain_axes(x: jax.Array, axes: Sequence[str | None],
                   mesh_rules: MeshRules | None) -> jax.Array:
  """x laid out as the rules lay out a tensor with these logical axes; as
  is without a mesh. On a parameter read inside a loop this also pins its
  gradient there (the transpose keeps the layout), so a weight used chunk
  by chunk accumulates a sharded gradient, not a whole one per device."""
  if mesh_rules is None or mesh_rules.mesh.size == 1:
    return x
  spec = logical_to_spec(axes, x.shape, mesh_rules.mesh, mesh_rules.rules)
  return jax.lax.with_sharding_constraint(
      x, NamedSharding(mesh_rules.mesh, spec))


def constrain_state(state: nnx.State, mesh_rules: MeshRules | None
                    ) -> nnx.State:
  """A state (params, or their gradients: same Variables, same axes) laid
  out as the rules lay out the params; as is without a mesh."""
  if mesh_rules is None or mesh_rules.mesh.size == 1:
    return state
  shardings = state_shardings(state, mesh_rules.mesh, mesh_rules.rules)
  return jax.tree.map(
      lambda s, var: jax.tree.map(
          lambda x: jax.lax.with_sharding_constraint(x, s), var),
      shardings, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def state_shardings(abstract_state: nnx.State, mesh: Mesh,
                    rules: Rules = DEFAULT_RULES) -> nnx.State:
  """NamedSharding per parameter from its `axes` metadata."""

  def one(var):
    axes = var.get_metadata().get('axes', (None,) * len(var.shape))
    return NamedSharding(mesh, logical_to_spec(axes, var.shape, mesh, rules))

  return jax.tree.map(one, abstract_state,
                      is_leaf=lambda x: isinstance(x, nnx.Variable))

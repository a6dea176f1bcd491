"""layout.py: meshes from the config, rules as config data, on_mesh."""

import json

import jax
import ml_collections
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from configs import leap
from leap_jax import layout
from leap_jax.model import sharding
from leap_jax.warmstart import store


def _config(**mesh):
  config = leap.get_config("smoke")
  config.mesh.update(mesh)
  return config


def test_rules_survive_a_json_round_trip():
  config = _config()
  again = ml_collections.ConfigDict(json.loads(config.to_json()))
  assert layout.rules(again) == layout.rules(config) == leap.SHARDING_RULES
  assert dict(layout.rules(config))["batch"] == ("data", "fsdp")


def test_meshes_from_config():
  n = jax.device_count()
  assert dict(layout.training_mesh(_config()).shape) == {
      "data": 1, "fsdp": n, "tensor": 1}
  with pytest.raises(ValueError, match="does not cover"):
    layout.training_mesh(_config(data=n + 1))
  # A tensor size that does not divide this host's devices falls back to 1.
  local = layout.sampling_mesh(_config(tensor=n + 1))
  assert dict(local.shape)["tensor"] == 1
  assert set(local.devices.flat) == set(jax.local_devices())


def test_param_shardings_follow_the_rules():
  config = _config()
  model_cfg = store.embedded_model_config(config.model)
  mesh = layout.training_mesh(config)
  shardings = layout.param_shardings(model_cfg, mesh, config)
  table = shardings["embed"]["table_VD"]
  assert isinstance(table, NamedSharding) and table.mesh == mesh


def test_on_mesh_replicates_single_device_leaves():
  mesh = sharding.make_mesh()
  placed = NamedSharding(mesh, P())
  tree = {"count": jax.numpy.zeros((), jax.numpy.int32),
          "shape": jax.ShapeDtypeStruct((3,), np.float32),
          "kept": jax.device_put(np.ones(2), placed)}
  out = layout.on_mesh(tree, mesh)
  assert out["count"].sharding == placed and int(out["count"]) == 0
  assert out["shape"].sharding == placed
  assert out["kept"] is tree["kept"]

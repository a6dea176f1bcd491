"""layout.py: meshes from the config, rules as config data, on_mesh."""

import json

import jax
import ml_collections
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from configs import leap
import os
import subprocess
import sys

import optax

from leap_jax import layout
from leap_jax.model import sharding, transformer
from leap_jax.rl import master_weights
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


def test_place_params_keeps_laid_out_leaves_and_copies_on_request():
  config = _config()
  model_cfg = store.embedded_model_config(config.model)
  shardings = layout.param_shardings(model_cfg, layout.training_mesh(config),
                                     config)
  _, host = transformer.init(model_cfg)
  placed = layout.place_params(jax.tree.map(np.asarray, host), shardings)
  again = layout.place_params(placed, shardings)
  copied = layout.place_params(placed, shardings, copy=True)
  for p, a, c in zip(*(jax.tree.leaves(t) for t in (placed, again, copied))):
    assert a is p and c is not p
    np.testing.assert_array_equal(np.asarray(c), np.asarray(p))


OPT_SCRIPT = r"""
import json
import jax, numpy as np, optax
from configs import leap
from leap_jax import layout
from leap_jax.rl import master_weights
from leap_jax.model import transformer
from leap_jax.warmstart import store
config = leap.get_config("smoke")
cfg = store.embedded_model_config(config.model).replace(dtype="bfloat16")
mesh = layout.training_mesh(config)
shardings = layout.param_shardings(cfg, mesh, config)
params = layout.place_params(transformer.init(cfg)[1], shardings)
opt = master_weights.with_master_weights(optax.adamw(1e-3))
state = layout.init_opt_state(opt, params, mesh)
abstract = layout.abstract_opt_state(opt, params, mesh)
table = lambda tree: tree["embed"]["table_VD"][...]
master, (adam, *_) = state.master, state.inner
print(json.dumps({
    "param": str(table(params).sharding.spec),
    "master": str(table(master).sharding.spec),
    "mu": str(table(adam.mu).sharding.spec),
    "count": str(adam.count.sharding.spec),
    "abstract_equal": all(
        a.sharding == x.sharding for a, x in zip(jax.tree.leaves(abstract),
                                                  jax.tree.leaves(state))),
}))
"""


def test_opt_state_is_laid_out_like_the_params_on_four_devices():
  """Adam moments and the master copy follow the params' sharding; step
  counts are replicated (jit alone replicates the moments' zeros)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root,
             XLA_FLAGS="--xla_force_host_platform_device_count=4")
  proc = subprocess.run([sys.executable, "-c", OPT_SCRIPT], env=env, cwd=root,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["param"] == result["master"] == result["mu"]
  assert "fsdp" in result["param"]
  assert result["count"] in ("P()", "PartitionSpec()")  # replicated
  assert result["abstract_equal"]

import pytest

from configs import leap
from leap_jax import policy as policy_lib
from leap_jax.model import smollm2


def test_hf_needs_a_path_and_a_real_one(tmp_path):
  config = leap.get_config("hf")
  with pytest.raises(ValueError, match="--config.model.path"):
    policy_lib.model_path(config.model)
  config.model.path = str(tmp_path / "missing")
  with pytest.raises(ValueError, match="no such file"):
    policy_lib.model_path(config.model)
  config.model.path = str(tmp_path)
  with pytest.raises(ValueError, match="config.json"):
    policy_lib.model_path(config.model)


def test_gguf_defaults_to_the_smollm2_wheel():
  config = leap.get_config("smollm2")
  assert policy_lib.model_path(config.model) == str(smollm2.gguf_path())


def test_unknown_source_is_named():
  config = leap.get_config("smoke")
  config.model.source = "onnx"
  with pytest.raises(ValueError, match="onnx"):
    policy_lib.load(config, ["level1/relu"], None)


def test_hf_loads_straight_onto_the_training_mesh(tmp_path):
  import jax
  from jax.sharding import NamedSharding
  from leap_jax import layout
  from tests.model.conftest import write_tiny_with_tokenizer
  directory = write_tiny_with_tokenizer(tmp_path / "tiny")
  config = leap.get_config("hf")
  config.model.path = str(directory)
  config.model.attention = "dot"
  policy = policy_lib.load(config, ["level1/relu"], None)
  mesh = layout.training_mesh(config)
  want = layout.param_shardings(policy.model_cfg, mesh, config)
  assert policy.model_cfg.attention == "dot"
  q = policy.params["layers"]["attn"]["q_kernel"][...]
  assert isinstance(q.sharding, NamedSharding) and q.sharding.mesh == mesh
  assert q.sharding == want["layers"]["attn"]["q_kernel"]
  assert q.shape[0] == policy.model_cfg.num_layers
  # Laid out already: the trainer keeps these arrays (no host round trip).
  placed = layout.place_params(policy.params, want)
  assert all(a is b for a, b in zip(jax.tree.leaves(placed),
                                    jax.tree.leaves(policy.params)))

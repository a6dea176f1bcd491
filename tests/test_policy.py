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

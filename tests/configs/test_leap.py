import pytest

from configs import leap


def test_default_config_has_env_block_and_is_locked():
  config = leap.get_config()
  assert config.seed == 0 and config.env.backend == "auto"
  with pytest.raises(AttributeError):
    config.env.num_wrokers = 3  # a typo is an error, not a new field


def test_unknown_variant_is_named():
  with pytest.raises(ValueError, match="nope"):
    leap.get_config("nope")

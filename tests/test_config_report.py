import json

import ml_collections

from configs import leap
from leap_jax import config_report


def test_flatten_and_differences_by_hand():
  a = ml_collections.ConfigDict({"seed": 0, "rl": {"g": 8, "ps": (1.0, 2.0)},
                                 "name": "x"})
  b = ml_collections.ConfigDict({"seed": 0, "rl": {"g": 4, "ps": (1.0, 2.0)},
                                 "extra": True, "name": "x"})
  assert config_report.flatten(a) == {"seed": 0, "rl.g": 8, "rl.ps": [1.0, 2.0],
                                      "name": "x"}
  assert config_report.differences(a, b) == [("rl.g", 8, 4),
                                             ("extra", None, True)]
  assert config_report.change_lines(a, b) == ["rl.g = 4  (default 8)",
                                              "extra = true  (default null)"]


def test_a_variant_differs_from_itself_in_nothing_and_json_round_trips(
    tmp_path):
  config = leap.get_config("smoke")
  assert config_report.change_lines(leap.get_config("smoke"), config) == []
  config.rl.num_samples = 6
  path = config_report.write(tmp_path / "run", config)
  with open(path) as f:
    saved = json.load(f)
  assert config_report.differences(saved, config) == []
  assert config_report.differences(saved, leap.get_config("smoke")) == [
      ("rl.num_samples", 6, 4)]

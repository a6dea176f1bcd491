"""cli: the one error path of the launchers (flag parsing in-process)."""

import sys

import pytest
from absl import flags
from ml_collections import config_flags

from leap_jax import cli

CONFIG = "configs/leap.py"


def _flag_values():
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file("config", cli.DEFAULT_CONFIG, "run config",
                                  flag_values=fv)
  flags.DEFINE_string("workdir", None, "dir", flag_values=fv)
  return fv


def _parse(monkeypatch, *args):
  """As absl's app.run does: argv is sys.argv (config_flags reads the
  overrides from there)."""
  monkeypatch.setattr(sys, "argv", ["train"])
  fv = _flag_values()  # the launchers define their flags at import
  argv = ["train", *args]
  monkeypatch.setattr(sys, "argv", argv)
  return cli.parse_flags("train", argv, fv), fv


def _error(capsys, monkeypatch, *args):
  with pytest.raises(SystemExit) as e:
    _parse(monkeypatch, *args)
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("train: error: "), err
  return err.strip()[len("train: error: "):]


def test_unknown_fields_name_the_nearest(capsys, monkeypatch):
  assert _error(capsys, monkeypatch, "--config.rl.num_sampels=3") == (
      "unknown config field 'rl.num_sampels' (nearest: rl.num_samples); "
      "--helpfull lists them")
  assert "(nearest: rl." in _error(capsys, monkeypatch,
                                   "--config.rl.bogus=1")
  assert "(nearest: env.num_workers)" in _error(
      capsys, monkeypatch, "--config.env.num_wrokers=2")
  assert "(nearest: eval_every)" in _error(capsys, monkeypatch,
                                           "--config.eval_evry=2")


def test_bad_variant_file_and_value(capsys, monkeypatch):
  assert _error(capsys, monkeypatch, f"--config={CONFIG}:smok") == (
      f"--config={CONFIG}:smok: unknown variant 'smok' of configs/leap.py "
      "(did you mean 'smoke'?); known: (default), level1, bench, smollm2, hf, smoke")
  assert "not found" in _error(capsys, monkeypatch,
                               "--config=configs/nope.py")
  assert "invalid literal for int()" in _error(
      capsys, monkeypatch, f"--config={CONFIG}", "--config.rl.num_samples=abc")
  assert "wrokdir" in _error(capsys, monkeypatch, "--wrokdir=x")


def test_good_flags_parse_and_defaults_come_without_overrides(monkeypatch):
  rest, fv = _parse(monkeypatch, f"--config={CONFIG}:smoke",
                    "--config.rl.b1=0.8")
  assert rest == ["train"] and fv.config.rl.b1 == 0.8
  assert cli.config_defaults(flag_values=fv).rl.b1 == 0.9
  assert cli.config_defaults(flag_values=fv).variant == "smoke"


def test_a_bad_override_fails_where_the_launcher_defines_its_flag(
    capsys, monkeypatch):
  """config_flags parses the default config, overrides included, when the
  flag is defined (a launcher's import)."""
  monkeypatch.setattr(sys, "argv", ["sft", "--config.sft.stpes=3"])
  with pytest.raises(SystemExit):
    cli.define_config("sft", "run config")
  assert capsys.readouterr().err == (
      "sft: error: unknown config field 'sft.stpes' (nearest: sft.steps); "
      "--helpfull lists them\n")


def test_user_errors_and_nearest(capsys):
  with pytest.raises(SystemExit):
    with cli.user_errors("evaluate", ValueError):
      raise ValueError("two\nlines")
  assert capsys.readouterr().err == "evaluate: error: two; lines\n"
  with pytest.raises(KeyError):  # other types pass through
    with cli.user_errors("evaluate", ValueError):
      raise KeyError("x")
  assert cli.nearest("rl.lr", ["rl.learning_rate", "seed", "rl.b1"]) in (
      "rl.learning_rate", "rl.b1")
  assert cli.nearest("sedd", ["rl.seed", "seed"]) == "seed"

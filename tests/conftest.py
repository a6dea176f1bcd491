"""Processes the tests start (launch/*.py, benchmarks) import this checkout,
as pytest itself does (pyproject's pythonpath), whether or not the package
is installed (`pip install -e .`)."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if p and p != ROOT])


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory):
  """The smoke config's policy on relu and abs after 2 warm-start steps: it
  answers (badly), fast. Made once for every module that asks (tests only
  read it)."""
  from configs import leap  # pylint: disable=g-import-not-at-top
  from leap_jax import policy as policy_lib  # pylint: disable=g-import-not-at-top
  from leap_jax.env.verdict import Status, Verdict  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart import store  # pylint: disable=g-import-not-at-top
  config = leap.get_config("smoke")
  directory = str(tmp_path_factory.mktemp("ws"))
  config.sft.update(dir=directory, steps=2)

  class NoEnv:
    def evaluate(self, requests):
      return [Verdict(t, Status.OK, "") for t, _ in requests]

  store.make(directory, config, ["level1/relu", "level1/abs"], NoEnv())
  return policy_lib.load(config, ["level1/relu", "level1/abs"], None)

import numpy as np
import pytest

from leap_jax import debug_metrics
from tests.test_rollout_dump import STOP, _rollout

NAN = float("nan")


def test_step_metrics_by_hand():
  ro = _rollout()  # lengths 3, 4 (cut), 2, 3, 2; every logprob -0.5
  r = np.array([[[1, NAN], [-1, -1]], [[0, NAN], [0, NAN]]])
  adv = np.array([[[1, 0], [-0.5, -1]], [[0, 0], [0, 0]]])
  out = debug_metrics.step_metrics(ro, r, adv, max_new_tokens=4,
                                   stop_token_ids={STOP}, seconds_sampling=2.0)
  assert out["response_length_mean"] == pytest.approx(14 / 5)
  assert out["response_length_max"] == 4
  assert out["response_cut_share"] == pytest.approx(1 / 5)
  assert out["entropy"] == pytest.approx(0.5)  # -mean log p
  assert out["tokens_per_second"] == pytest.approx(7.0)
  # Over the 5 turns run: rewards 1, -1, -1, 0, 0; advantages 1, -.5, -1, 0, 0.
  assert out["reward_mean"] == pytest.approx(-0.2)
  assert out["reward_std"] == pytest.approx(np.std([1, -1, -1, 0, 0]))
  assert out["advantage_mean"] == pytest.approx(-0.1)
  assert (out["advantage_min"], out["advantage_max"]) == (-1.0, 1.0)
  assert out["advantage_zero_share"] == pytest.approx(2 / 5)


def test_entropy_estimate_is_unbiased_for_a_known_distribution():
  """Tokens drawn from p with their log p: -mean log p -> H(p)."""
  rng = np.random.default_rng(0)
  p = np.array([0.5, 0.25, 0.125, 0.125])
  x = rng.choice(4, size=200_000, p=p)
  ro = _rollout()
  rec = ro.records[0]
  rec.completion.token_ids = x.tolist()
  rec.completion.logprobs = np.log(p[x])
  ro.records = [rec]
  zeros = np.zeros((2, 2, 2))
  out = debug_metrics.step_metrics(ro, zeros, zeros, 10**6, {STOP}, 0.0)
  entropy = -np.sum(p * np.log(p))  # 1.75 bits = 1.213 nats
  assert out["entropy"] == pytest.approx(entropy, abs=5e-3)
  assert "tokens_per_second" not in out  # no sampling time measured

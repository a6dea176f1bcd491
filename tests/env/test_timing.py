import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from leap_jax.env import timing


def test_speedup_estimate_hand_computed():
  times = timing.RoundTimes(a_seconds=(2.0, 4.0, 3.0), b_seconds=(1.0, 1.0, 3.0))
  est = timing.speedup_estimate(times, bootstrap=200)
  assert est.median == 2.0          # ratios 2, 4, 1
  assert est.a_seconds == 3.0 and est.b_seconds == 1.0
  assert 1.0 <= est.ci_low <= est.median <= est.ci_high <= 4.0


def test_noise_band_is_high_quantile_of_abs_log():
  ratios = [1.0, 1.1, 1 / 1.1, 1.02, 0.98]
  band = timing.noise_band(ratios, quantile=1.0, floor=0.0)
  assert band == pytest.approx(math.log(1.1))
  assert timing.noise_band([1.0], floor=0.03) == 0.03
  with pytest.raises(ValueError):
    timing.noise_band([])


@given(st.floats(0.2, 5.0), st.floats(0.0, 0.5))
def test_banded_speedup(raw, band):
  out = timing.banded_speedup(raw, band)
  assert out == (raw if abs(math.log(raw)) > band else 1.0)


def test_log_halfwidth_is_the_wider_of_band_and_interval():
  # Interval [1.0, 1.5] around 1.2: log(1.2) = 0.182 below, log(1.25) =
  # 0.223 above; the band 0.1 is narrower, 0.3 wider.
  assert timing.log_halfwidth(1.2, 1.0, 1.5, 0.1) == pytest.approx(
      math.log(1.25))
  assert timing.log_halfwidth(1.2, 1.0, 1.5, 0.3) == 0.3
  # A speedup of 1.25 clears a 0.1 band by itself, not with that interval.
  assert timing.banded_speedup(1.25, 0.1) == 1.25
  assert timing.banded_speedup(1.25, 0.1, 1.0, 1.6) == 1.0
  assert timing.banded_speedup(1.25, 0.1, 1.2, 1.3) == 1.25


def test_measure_interleaved_rotates_inputs_and_counts_rounds():
  seen = []
  def a(x):
    seen.append(float(x[0]))
    return x
  inputs = [(np.full(4, i, np.float32),) for i in range(3)]
  cfg = timing.TimingConfig(rounds=6, warmup_calls=1, min_seconds_per_sample=0.0)
  times = timing.measure_interleaved(a, jnp.negative, inputs, cfg)
  assert len(times.a_seconds) == len(times.b_seconds) == 6
  assert set(seen) == {0.0, 1.0, 2.0}


def test_measure_interleaved_respects_budget():
  cfg = timing.TimingConfig(rounds=1000, min_rounds=3, max_seconds=0.0,
                            warmup_calls=0, min_seconds_per_sample=0.0)
  times = timing.measure_interleaved(jnp.abs, jnp.abs, [(np.ones(4),)], cfg)
  assert len(times.a_seconds) == 3   # min_rounds, then the budget stops it

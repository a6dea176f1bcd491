"""Noise-aware timing: interleaved rounds, median ratio, bootstrap CI, A/A band.

design.md section 4. Pure functions plus one measurement loop; the loop runs
inside a worker, the statistics anywhere.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

# Bound here, before any candidate code runs, so patching time cannot reach it.
_perf_counter = time.perf_counter


@dataclasses.dataclass(frozen=True)
class TimingConfig:
  rounds: int = 20              # ABBA rounds; each times both once
  min_rounds: int = 5           # kept even when max_seconds runs out
  max_seconds: float = 20.0     # budget for all rounds of one comparison
  warmup_calls: int = 2         # per function, after compilation
  min_seconds_per_sample: float = 10e-3  # repeat calls until a sample lasts this
  max_calls_per_sample: int = 64
  bootstrap: int = 500
  seed: int = 0


@dataclasses.dataclass(frozen=True)
class RoundTimes:
  """Seconds per call of A and B in each round."""
  a_seconds: tuple[float, ...]
  b_seconds: tuple[float, ...]


def _time_calls(fn: Callable[..., Any], args: Sequence[Any], calls: int) -> float:
  total = 0.0
  for _ in range(calls):
    start = _perf_counter()
    jax.block_until_ready(fn(*args))
    total += _perf_counter() - start
  return total / calls


def measure_interleaved(fn_a: Callable[..., Any], fn_b: Callable[..., Any],
                        inputs: Sequence[Sequence[Any]],
                        config: TimingConfig) -> RoundTimes:
  """Times A and B in ABBA order, rotating input sets between rounds."""
  for fn in (fn_a, fn_b):
    for _ in range(config.warmup_calls):
      jax.block_until_ready(fn(*inputs[0]))
  probe = min(_time_calls(fn_a, inputs[0], 1), _time_calls(fn_b, inputs[0], 1))
  calls = int(min(config.max_calls_per_sample,
                  max(1, math.ceil(config.min_seconds_per_sample
                                   / max(probe, 1e-9)))))
  a_times, b_times = [], []
  start = _perf_counter()
  for r in range(config.rounds):
    if r >= config.min_rounds and _perf_counter() - start > config.max_seconds:
      break
    args = inputs[r % len(inputs)]
    if r % 2 == 0:
      a_times.append(_time_calls(fn_a, args, calls))
      b_times.append(_time_calls(fn_b, args, calls))
    else:
      b_times.append(_time_calls(fn_b, args, calls))
      a_times.append(_time_calls(fn_a, args, calls))
  return RoundTimes(tuple(a_times), tuple(b_times))


@dataclasses.dataclass(frozen=True)
class SpeedupEstimate:
  """Median of per-round ratios t_a / t_b with a bootstrap 95% CI."""
  median: float
  ci_low: float
  ci_high: float
  a_seconds: float
  b_seconds: float
  rounds: int


def speedup_estimate(times: RoundTimes, bootstrap: int = 500,
                     seed: int = 0) -> SpeedupEstimate:
  """B's speedup over A: median over rounds of t_a / t_b."""
  a = np.asarray(times.a_seconds, np.float64)
  b = np.asarray(times.b_seconds, np.float64)
  ratios = a / b
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, len(ratios), size=(bootstrap, len(ratios)))
  medians = np.median(ratios[idx], axis=1)
  low, high = np.quantile(medians, [0.025, 0.975])
  return SpeedupEstimate(float(np.median(ratios)), float(low), float(high),
                         float(np.median(a)), float(np.median(b)), len(ratios))


def noise_band(aa_speedups: Sequence[float], quantile: float = 0.95,
               floor: float = 0.01) -> float:
  """The |log ratio| that A/A comparisons stay within, at `quantile`."""
  if not aa_speedups:
    raise ValueError("noise_band needs at least one A/A measurement")
  logs = np.abs(np.log(np.asarray(aa_speedups, np.float64)))
  return float(max(floor, np.quantile(logs, quantile)))


def log_halfwidth(raw: float, ci_low: float, ci_high: float,
                  band: float) -> float:
  """A speedup's noise half-width in log space: the larger of the band (the
  machine's A/A noise) and the estimate's own bootstrap interval."""
  half = max(math.log(raw / ci_low), math.log(ci_high / raw), 0.0)
  return max(band, half)


def banded_speedup(raw: float, band: float, ci_low: float | None = None,
                   ci_high: float | None = None) -> float:
  """`raw` when it lies outside the noise (the band, widened to the
  interval [ci_low, ci_high] when given), else exactly 1.0."""
  width = band if ci_low is None else log_halfwidth(raw, ci_low, ci_high, band)
  return raw if abs(math.log(raw)) > width else 1.0

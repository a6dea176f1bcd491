"""The kernel environment: answers in, verdicts out (design.md section 5).

Screening and judging happen here, in the trusted process; candidates run only
in pool workers. Trial inputs come from fresh secret seeds on every call and
the reference outputs never leave this process. The one exception is
`input_seed`, where no policy adapts to the verdicts while they are made:
the warm start's builds, whose judged data (error figures in the feedback)
must not differ between two builds of one config, and an evaluation asked
to repeat (the trainer's evaluations and `launch/evaluate.py --input_seed`,
through `fixed_inputs`), whose turns 2-3 read that feedback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

import kernels_pallas
from leap_jax.env import candidate
from leap_jax.env import compare
from leap_jax.env import pool as pool_lib
from leap_jax.env import sandbox
from leap_jax.env import screen
from leap_jax.env import timing as timing_lib
from leap_jax.env import wire
from leap_jax.env.verdict import Status, Timing, Verdict

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class EnvConfig:
  pool: pool_lib.PoolConfig = pool_lib.PoolConfig()
  trials: int = 3                      # fresh random input sets per candidate
  check_lowering: bool = True          # lower for the GPU backend on CPU hosts
  timing: bool = False                 # time correct candidates
  timing_config: timing_lib.TimingConfig = timing_lib.TimingConfig()
  calibration_tasks: tuple[str, ...] = ("level1/vector_add", "level1/relu")
  calibration_repeats: int = 4         # A/A runs per calibration task
  band_floor: float = 0.02
  memory_bytes: int = 8 << 30
  cpu_seconds: int = 300
  max_answer_chars: int = candidate.MAX_ANSWER_CHARS  # longer: no_code
  # None: fresh secret seeds per call (RL). An int: a task's trial inputs
  # are the same on every call, derived from it and the task id (warm-start
  # data builds; evaluations through `fixed_inputs`): no policy adapts to
  # those verdicts while they are made.
  input_seed: int | None = None
  # Keeps an evaluation's inputs apart from those a warm start of the same
  # seed was built (and so trained) on: turn-2 feedback there would be its
  # SFT prompts word for word.
  input_salt: str = ""

  @property
  def backend(self) -> str:
    setups = self.pool.setups
    return setups[0].backend if setups else "interpret"

  @property
  def target_backend(self) -> str:
    """The GPU backend answers are written for: on a CPU host kernels run in
    interpret mode but are checked by lowering for Triton."""
    return "mosaic" if self.backend == "mosaic" else "triton"


@dataclasses.dataclass
class _TaskBatch:
  """Inputs and reference outputs for one task within one evaluate call."""
  task: kernels_pallas.Task
  inputs: list[tuple[np.ndarray, ...]]
  reference_outputs: list[list[np.ndarray]]
  treedef: str
  leaves: list[tuple[list[int], str]]

  @property
  def message_cap(self) -> int:
    """Bytes a worker's reply may have: every trial's outputs and a header."""
    return wire.message_cap(
        sum(o.nbytes for outs in self.reference_outputs for o in outs))


def _seconds(value: Any) -> tuple[float, ...]:
  """Per-round seconds from a worker: finite and positive, else ()."""
  if not isinstance(value, list) or not all(
      isinstance(v, float | int) and not isinstance(v, bool) for v in value):
    return ()
  out = tuple(float(v) for v in value)
  return out if all(0 < v < float("inf") for v in out) else ()


def _fresh_key() -> jax.Array:
  return jax.random.key(secrets.randbits(63))


def _seeded_key(seed: int, task_id: str, salt: str = "") -> jax.Array:
  digest = hashlib.sha256(f"{salt}{seed}:{task_id}".encode()).digest()
  return jax.random.key(int.from_bytes(digest[:8], "little") >> 1)


class KernelEnv:
  """Evaluates model answers for kernel tasks through a worker pool."""

  def __init__(self, config: EnvConfig = EnvConfig()):
    self.config = config
    self.pool = pool_lib.WorkerPool(config.pool)
    self.band: float | None = None
    self.task_bands: dict[str, float] = {}
    self._exports: dict[str, bytes] = {}
    self._references: dict[str, Any] = {}
    _LOG.info(
        "kernel env: %d workers (%s), backend %s; sandbox: AST screen, audit "
        "hook, restricted builtins, rlimits; the OS layer under them is "
        "logged by the pool with the first job", self.pool.size,
        config.pool.start_method, config.backend)

  def close(self) -> None:
    self.pool.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  @contextlib.contextmanager
  def fixed_inputs(self, seed: int):
    """Inside, each task's trial inputs come from `seed` (salted apart from
    a warm-start build's of that seed): for evaluations, which no policy
    learns from, so that step 0 and step N judge the same inputs. It swaps
    this env's config: nothing else may call evaluate() meanwhile (RL and
    evaluation take turns in one thread)."""
    fresh = self.config
    self.config = dataclasses.replace(fresh, input_seed=seed,
                                      input_salt="eval:")
    try:
      yield self
    finally:
      self.config = fresh

  @property
  def interpret(self) -> bool:
    return self.config.backend == "interpret"

  # Reference side: inputs, outputs, exported program for timing.

  def _reference_fn(self, task: kernels_pallas.Task):
    if task.task_id not in self._references:
      self._references[task.task_id] = jax.jit(task.reference)
    return self._references[task.task_id]

  def _reference_export(self, task: kernels_pallas.Task) -> bytes:
    if task.task_id not in self._exports:
      platform = "cpu" if self.interpret else "cuda"
      exported = jax.export.export(jax.jit(task.reference),
                                   platforms=[platform])(*task.input_shapes())
      self._exports[task.task_id] = bytes(exported.serialize())
    return self._exports[task.task_id]

  def _task_batch(self, task: kernels_pallas.Task) -> _TaskBatch:
    seed = self.config.input_seed
    key = (_fresh_key() if seed is None
           else _seeded_key(seed, task.task_id, self.config.input_salt))
    keys = jax.random.split(key, self.config.trials)
    inputs, outputs = [], []
    for key in keys:
      trial = tuple(np.array(x) for x in task.make_inputs(key))
      out = self._reference_fn(task)(*trial)
      leaves, treedef = jax.tree.flatten(out)
      inputs.append(trial)
      outputs.append([np.array(leaf) for leaf in leaves])
    return _TaskBatch(task, inputs, outputs, str(treedef),
                      [(list(o.shape), o.dtype.name) for o in outputs[0]])

  def _job(self, batch: _TaskBatch, source: str) -> dict[str, Any]:
    cfg = self.config
    return {
        "source": source,
        "arg_shapes": [(list(x.shape), x.dtype.name) for x in batch.inputs[0]],
        "trial_inputs": batch.inputs,
        "check_lowering": cfg.check_lowering,
        "limits": dataclasses.asdict(sandbox.Limits(
            memory_bytes=cfg.memory_bytes, cpu_seconds=cfg.cpu_seconds)),
        "timing": dataclasses.asdict(cfg.timing_config),
        "reference_export": None,
        "max_message_bytes": batch.message_cap,
        "target_backend": cfg.target_backend,
    }

  def _judge(self, batch: _TaskBatch, want_timing: bool):
    """judge(header, arrays) for the pool: never raises, so one candidate's
    failure stays that candidate's verdict."""
    want = [o for outs in batch.reference_outputs for o in outs]

    def judge(header, arrays):
      try:
        wrong = compare.compare_structure(
            header.get("treedef"), header.get("leaves"), batch.treedef,
            batch.leaves) or compare.check_arrays(arrays, want)
        if wrong is not None:
          return wrong, False
        result = compare.compare_values(arrays, want, batch.task.atol,
                                        batch.task.rtol)
        return result, want_timing and result.status is Status.OK
      except Exception as e:  # noqa: BLE001  (ours: the inputs were checked)
        _LOG.exception("judging a %s candidate failed", batch.task.task_id)
        return compare.Comparison(Status.HARNESS_ERROR,
                                  f"Judging failed: {type(e).__name__}."), False
    return judge

  # Public API.

  def evaluate(self, requests: Sequence[tuple[str, str]],
               timing_on: bool | None = None) -> list[Verdict]:
    """One verdict per (task_id, answer), in order."""
    timing_on = self.config.timing if timing_on is None else timing_on
    if timing_on and self.band is None:
      self.calibrate()
    verdicts: list[Verdict | None] = [None] * len(requests)
    batches: dict[str, _TaskBatch] = {}
    jobs, judges, where = [], [], []
    for i, (task_id, answer) in enumerate(requests):
      start = time.monotonic()
      task = kernels_pallas.get_task(task_id)  # unknown task: the caller's error
      try:
        verdict, source = self._screened(task, answer)
        if verdict is None:
          if task_id not in batches:
            batches[task_id] = self._task_batch(task)
          job = self._job(batches[task_id], source)
          if timing_on:
            job["reference_export"] = self._reference_export(task)
      except Exception as e:  # noqa: BLE001  (ours; never the whole batch's)
        _LOG.exception("preparing a %s candidate failed", task_id)
        verdict = Verdict(task_id, Status.HARNESS_ERROR,
                          f"Preparing the candidate failed: {type(e).__name__}.")
      if verdict is not None:
        verdicts[i] = dataclasses.replace(verdict,
                                          seconds=time.monotonic() - start)
        continue
      jobs.append(job)
      judges.append(self._judge(batches[task_id], timing_on))
      where.append(i)
    for i, outcome in zip(where, self.pool.run(jobs, judges)):
      try:
        verdicts[i] = self._verdict(requests[i][0], outcome)
      except Exception as e:  # noqa: BLE001
        _LOG.exception("a %s verdict failed", requests[i][0])
        verdicts[i] = Verdict(requests[i][0], Status.HARNESS_ERROR,
                              f"Judging failed: {type(e).__name__}.",
                              seconds=outcome.seconds)
    return verdicts

  def _screened(self, task: kernels_pallas.Task, answer: str
                ) -> tuple[Verdict | None, str | None]:
    """(verdict, None) for an answer that never reaches a worker, else
    (None, its source)."""
    too_long = candidate.oversize(answer, self.config.max_answer_chars)
    if too_long:
      return Verdict(task.task_id, Status.NO_CODE, too_long), None
    source = candidate.extract_code(answer, self.config.max_answer_chars)
    if source is None:
      return Verdict(task.task_id, Status.NO_CODE), None
    screened = screen.screen_source(source)
    if screened.status is not None:
      return Verdict(task.task_id, screened.status, screened.detail), None
    return None, source

  def _verdict(self, task_id: str, outcome: pool_lib.Outcome) -> Verdict:
    if outcome.status is not None:
      return Verdict(task_id, outcome.status, outcome.detail,
                     seconds=outcome.seconds)
    result: compare.Comparison = outcome.judged
    timing_result = None
    if outcome.timing is not None:
      timing_result = self._timing(outcome.timing, self.band_for(task_id))
      if timing_result is None:
        return Verdict(task_id, Status.CRASHED,
                       "Malformed timing message from the worker.",
                       seconds=outcome.seconds)
    return Verdict(task_id, result.status, result.detail,
                   seconds=outcome.seconds, timing=timing_result,
                   errors=result.errors)

  def _timing(self, message: dict[str, Any], band: float) -> Timing | None:
    """The timing a worker reported, or None if the message is malformed."""
    times = timing_lib.RoundTimes(
        _seconds(message.get("a_seconds")), _seconds(message.get("b_seconds")))
    rounds = len(times.a_seconds)
    if not 0 < rounds <= self.config.timing_config.rounds or (
        rounds != len(times.b_seconds)):
      return None
    est = timing_lib.speedup_estimate(times, self.config.timing_config.bootstrap,
                                  self.config.timing_config.seed)
    return Timing(speedup=timing_lib.banded_speedup(est.median, band,
                                                    est.ci_low, est.ci_high),
                  raw_speedup=est.median, ci_low=est.ci_low,
                  ci_high=est.ci_high, band=band, rounds=est.rounds,
                  ref_seconds=est.a_seconds, cand_seconds=est.b_seconds,
                  interpret=self.interpret)

  def band_for(self, task_id: str) -> float:
    """The task's own A/A band where calibration measured one, else the
    band pooled over every calibration run."""
    return self.task_bands.get(task_id, self.band)

  def calibrate(self) -> float:
    """A/A runs of references against themselves; sets the pooled noise
    band and one band per calibration task (from that task's runs)."""
    jobs = []
    for task_id in self.config.calibration_tasks:
      batch = self._task_batch(kernels_pallas.get_task(task_id))
      job = self._job(batch, source="")
      job["reference_export"] = self._reference_export(batch.task)
      job["aa_calibration"] = True
      jobs += [job] * self.config.calibration_repeats
    outcomes = self.pool.run(jobs, [None] * len(jobs))
    ratios, by_task = [], {}
    repeats = self.config.calibration_repeats
    for i, outcome in enumerate(outcomes):
      if outcome.timing is None:
        raise RuntimeError(f"A/A calibration failed: {outcome.status} "
                           f"{outcome.detail}")
      times = timing_lib.RoundTimes(tuple(outcome.timing["a_seconds"]),
                                tuple(outcome.timing["b_seconds"]))
      ratios.append(timing_lib.speedup_estimate(times).median)
      task_id = self.config.calibration_tasks[i // repeats]
      by_task.setdefault(task_id, []).append(ratios[-1])
    floor = self.config.band_floor
    self.band = timing_lib.noise_band(ratios, floor=floor)
    self.task_bands = {t: timing_lib.noise_band(r, floor=floor)
                       for t, r in by_task.items()}
    self.calibration_ratios = ratios
    _LOG.info("noise band: +-%.1f%% (|log ratio| q95 of %d A/A runs, %s); "
              "per task: %s", 100 * self.band, len(ratios),
              "interpret mode on CPU" if self.interpret else "GPU",
              ", ".join(f"{t} +-{100 * b:.1f}%"
                        for t, b in self.task_bands.items()))
    return self.band

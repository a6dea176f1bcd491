"""The multi-turn rollout driver and per-turn training samples.

Turn 1: P prompts x G samples in one policy call; verdicts from the judge;
the config's pruning turns them into budgets (dcp, none: every prompt gets
T, random: DCP's count of prompts chosen blindly; single-turn: 1). Each
later turn samples only the trajectories that are still active, with their
previous answers and feedback in the context, in one policy call per turn. The policy and judge are small protocols so
tests can script and count them.
"""

import dataclasses
import math
from typing import Any, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from leap_jax.env import timing as timing_lib
from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.rl import advantages as adv_lib
from leap_jax.rl import dcp, rewards
from leap_jax.rl.batching import TurnSample
from leap_jax.rl.config import RLConfig
from leap_jax.rl.prompts import Attempt, PromptBuilder


@dataclasses.dataclass
class Completion:
  """One sampled answer: generated ids (stop token included), their
  sampler logprobs, and the decoded text."""
  token_ids: list[int]
  logprobs: np.ndarray
  text: str


class Policy(Protocol):
  def sample(self, prompts: Sequence[Sequence[int]], num_samples: int,
             rng: Any) -> list[Completion]:
    """len(prompts) * num_samples completions, prompt-major."""


class Judge(Protocol):
  def evaluate(self, requests: Sequence[tuple[str, str]]) -> list[Any]:
    """One verdict (.correct, .feedback, .speedup) per (task_id, answer)."""


class SamplerPolicy:
  """A Policy over leap_jax.model.sampler.Sampler and a tokenizer."""

  def __init__(self, sampler, tokenizer, cfg: RLConfig,
               stop_token_ids: Sequence[int] | None = None):
    self.sampler, self.tokenizer, self.cfg = sampler, tokenizer, cfg
    self.stop_token_ids = stop_token_ids

  def set_params(self, state) -> None:
    """Points the sampler at new weights (after an update)."""
    self.sampler.state = state

  def sample(self, prompts, num_samples, rng):
    batch = self.sampler.generate(
        prompts, num_samples=num_samples,
        max_new_tokens=self.cfg.max_new_tokens,
        temperature=self.cfg.temperature, top_p=self.cfg.top_p,
        stop_token_ids=self.stop_token_ids, rng=rng)
    out = []
    for row in range(batch.tokens.shape[0]):
      n = int(batch.lengths[row])
      ids = batch.tokens[row, :n].tolist()
      text = tokenizer_lib.decode(self.tokenizer, ids)
      out.append(Completion(ids, batch.logprobs[row, :n], text))
    return out


class EnvJudge:
  """A Judge over leap_jax.env.environment.KernelEnv."""

  def __init__(self, env):
    self.env = env

  def evaluate(self, requests):
    return self.env.evaluate(list(requests))


@dataclasses.dataclass
class TurnRecord:
  p: int
  g: int
  t: int  # 0-based
  prompt_ids: list[int]
  completion: Completion
  verdict: Any


@dataclasses.dataclass
class Rollout:
  task_ids: list[str]
  records: list[TurnRecord]
  ok_PGT: np.ndarray        # success (speed_gate: correct and fast enough)
  active_PGT: np.ndarray
  budgets_P: np.ndarray
  speedup_PGT: np.ndarray   # banded; NaN where untimed or not evaluated
  policy_calls: int
  # Trajectories the environment failed (harness_error): no gradient, not a
  # failure for DCP, no tournament points, no further turns.
  dropped_PG: np.ndarray | None = None
  log_speed_PGT: np.ndarray | None = None  # log raw speedup; NaN: untimed
  speed_noise_PGT: np.ndarray | None = None  # log half-width; NaN: untimed

  def __post_init__(self):
    p, g, t = self.ok_PGT.shape
    if self.dropped_PG is None:
      self.dropped_PG = np.zeros((p, g), bool)
    for name in ('log_speed_PGT', 'speed_noise_PGT'):
      if getattr(self, name) is None:
        setattr(self, name, np.full((p, g, t), np.nan, np.float32))

  @property
  def tokens_generated(self) -> int:
    return sum(len(r.completion.token_ids) for r in self.records)


def is_harness_error(verdict: Any) -> bool:
  status = getattr(verdict, 'status', None)
  return str(getattr(status, 'value', status)) == 'harness_error'


def _speed(verdict: Any, cfg: RLConfig) -> tuple[float, float]:
  """(log raw speedup, its noise half-width); NaN when untimed."""
  timing = getattr(verdict, 'timing', None)
  if timing is None:
    return math.nan, math.nan
  band = timing.band if cfg.speed_band < 0 else cfg.speed_band
  return (math.log(timing.raw_speedup),
          timing_lib.log_halfwidth(timing.raw_speedup, timing.ci_low,
                                   timing.ci_high, band))


def _success(correct_PG: np.ndarray, log_speed_PG: np.ndarray,
             noise_PG: np.ndarray, cfg: RLConfig) -> np.ndarray:
  """Correct, and under speed_gate also significantly fast enough."""
  if cfg.method.reward == 'speed_gate':
    return np.asarray(rewards.speed_gate_ok(correct_PG, log_speed_PG,
                                            noise_PG, cfg.speed_p))
  return correct_PG


# The rollout key's fold_in tag for random pruning (sampling uses the turn
# index 0..T-1).
_PRUNING_STREAM = 1 << 20


def budgets_for(cfg: RLConfig, turn1_ok_PG: np.ndarray,
                dropped_PG: np.ndarray, rng: Any) -> np.ndarray:
  """Turn budgets [P] of the config's pruning (design.md section 2)."""
  p, pruning = turn1_ok_PG.shape[0], cfg.method.pruning
  if pruning == 'none' or cfg.turns == 1:
    return np.asarray(dcp.full_budgets(p, cfg.turns))
  t_min, t_max = cfg.dcp_bounds
  budgets = dcp.turn_budgets(turn1_ok_PG, cfg.turns, t_min, t_max, dropped_PG)
  if pruning == 'random':
    budgets = dcp.random_budgets(jax.random.fold_in(rng, _PRUNING_STREAM),
                                 jnp.sum(budgets > 1), p, cfg.turns)
  return np.asarray(budgets)


def rollout(task_ids: Sequence[str], policy: Policy, judge: Judge,
            builder: PromptBuilder, cfg: RLConfig, rng: Any = 0) -> Rollout:
  """Runs up to cfg.turns turns for P = len(task_ids) prompts x G samples."""
  p_n, g_n, t_n = len(task_ids), cfg.num_samples, cfg.turns
  rng = jax.random.key(rng) if isinstance(rng, int) else rng
  ok = np.zeros((p_n, g_n, t_n), bool)
  correct = np.zeros((p_n, g_n, t_n), bool)
  dropped = np.zeros((p_n, g_n), bool)
  speed = np.full((p_n, g_n, t_n), np.nan, np.float32)
  log_speed = np.full((p_n, g_n, t_n), np.nan, np.float32)
  noise = np.full((p_n, g_n, t_n), np.nan, np.float32)
  history: dict[tuple[int, int], list[Attempt]] = {}
  records: list[TurnRecord] = []
  budgets = np.ones((p_n,), np.int32)
  calls = 0
  # Turn 1 shares one prompt per task across its G samples.
  slots = [(p, g) for p in range(p_n) for g in range(g_n)]
  for t in range(t_n):
    if t == 0:
      prompts = [builder.encode(tid) for tid in task_ids]
      comps = policy.sample(prompts, g_n, jax.random.fold_in(rng, 0))
      prompt_of = {(p, g): prompts[p] for p, g in slots}
    else:
      prompts = [builder.encode(task_ids[p], history[(p, g)]) for p, g in slots]
      comps = policy.sample(prompts, 1, jax.random.fold_in(rng, t))
      prompt_of = dict(zip(slots, prompts))
    calls += 1
    if len(comps) != len(slots):
      raise ValueError(f'policy returned {len(comps)} completions for '
                       f'{len(slots)} trajectories')
    verdicts = judge.evaluate([(task_ids[p], c.text)
                               for (p, _), c in zip(slots, comps)])
    for (p, g), comp, verdict in zip(slots, comps, verdicts):
      log_speed[p, g, t], noise[p, g, t] = _speed(verdict, cfg)
      correct[p, g, t] = verdict.correct
      dropped[p, g] |= is_harness_error(verdict)
      if verdict.speedup is not None:
        speed[p, g, t] = verdict.speedup
      records.append(TurnRecord(p, g, t, prompt_of[(p, g)], comp, verdict))
      history.setdefault((p, g), []).append(
          Attempt(comp.text, verdict.feedback))
    ok[:, :, t] = _success(correct[:, :, t], log_speed[:, :, t],
                           noise[:, :, t], cfg)
    if t == 0:
      budgets = budgets_for(cfg, ok[:, :, 0], dropped, rng)
    # Still going: within budget, not solved, not dropped (active_mask's rule).
    slots = [(p, g) for p, g in slots
             if not (ok[p, g, t] or dropped[p, g]) and budgets[p] > t + 1]
    if not slots:
      break
  done = ok.copy()
  for r in records:
    done[r.p, r.g, r.t] |= is_harness_error(r.verdict)
  active = np.asarray(dcp.active_mask(budgets, done))
  ran = np.zeros_like(active)
  for r in records:
    ran[r.p, r.g, r.t] = True
  assert np.array_equal(active, ran), 'driver and dcp.active_mask disagree'
  return Rollout(list(task_ids), records, ok, active, budgets, speed, calls,
                 dropped, log_speed, noise)


def advantages(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  """A[p,g,t] for the config's reward and baseline, negatives weighed by
  `negative_weight`; zero on inactive turns and on dropped trajectories
  (a harness_error is the environment's failure, never the model's)."""
  return adv_lib.turn_advantages(cfg, ro.ok_PGT, ro.active_PGT,
                                 ~np.asarray(ro.dropped_PG, bool),
                                 ro.log_speed_PGT, ro.speed_noise_PGT)


def turn_rewards(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  """r[p,g,t]: what each turn's advantage is made from (before the
  baseline), for reading (rollout dumps): rank rewards spread over the
  trajectory's turns as LEAP does, discounted returns R_t, or the binary
  reward; NaN on turns not run."""
  r_PGT = np.asarray(adv_lib.turn_rewards(
      cfg, ro.ok_PGT, ro.active_PGT, ~np.asarray(ro.dropped_PG, bool),
      ro.log_speed_PGT, ro.speed_noise_PGT), np.float32)
  return np.where(np.asarray(ro.active_PGT, bool), r_PGT, np.nan)


def training_samples(ro: Rollout, adv_PGT: np.ndarray) -> list[TurnSample]:
  """Every turn is one sample; the prompt (history, feedback) has no loss."""
  return [TurnSample(r.prompt_ids, list(r.completion.token_ids),
                     np.asarray(r.completion.logprobs, np.float32),
                     float(adv_PGT[r.p, r.g, r.t]), r.p, r.g, r.t)
          for r in ro.records]

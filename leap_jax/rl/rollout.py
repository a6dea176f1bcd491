"""The multi-turn rollout driver and per-turn training samples.

Turn 1: P prompts x G samples in one policy call; verdicts from the judge;
DCP turns them into budgets (leap), or every prompt gets T (multiturn_full)
or 1 (grpo_single_turn). Each later turn samples only the trajectories that
are still active, with their previous answers and feedback in the context,
in one policy call per turn. The policy and judge are small protocols so
tests can script and count them.
"""

import dataclasses
from typing import Any, Protocol, Sequence

import jax
import numpy as np

from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.rl import advantages as adv_lib
from leap_jax.rl import baselines, dcp, rewards
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
  speedup_PGT: np.ndarray   # NaN where untimed or not evaluated
  policy_calls: int

  @property
  def tokens_generated(self) -> int:
    return sum(len(r.completion.token_ids) for r in self.records)


def _success(verdict: Any, cfg: RLConfig) -> bool:
  if not verdict.correct:
    return False
  if cfg.reward == 'speed_gate':
    return verdict.speedup is not None and verdict.speedup >= cfg.speed_p
  return True


def budgets_for(cfg: RLConfig, turn1_ok_PG: np.ndarray) -> np.ndarray:
  p = turn1_ok_PG.shape[0]
  if cfg.mode == 'leap':
    t_min, t_max = cfg.dcp_bounds
    return np.asarray(dcp.turn_budgets(turn1_ok_PG, cfg.turns, t_min, t_max))
  return np.asarray(dcp.full_budgets(p, cfg.turns))


def rollout(task_ids: Sequence[str], policy: Policy, judge: Judge,
            builder: PromptBuilder, cfg: RLConfig, rng: Any = 0) -> Rollout:
  """Runs up to cfg.turns turns for P = len(task_ids) prompts x G samples."""
  p_n, g_n, t_n = len(task_ids), cfg.num_samples, cfg.turns
  rng = jax.random.key(rng) if isinstance(rng, int) else rng
  ok = np.zeros((p_n, g_n, t_n), bool)
  speed = np.full((p_n, g_n, t_n), np.nan, np.float32)
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
      ok[p, g, t] = _success(verdict, cfg)
      if verdict.speedup is not None:
        speed[p, g, t] = verdict.speedup
      records.append(TurnRecord(p, g, t, prompt_of[(p, g)], comp, verdict))
      history.setdefault((p, g), []).append(
          Attempt(comp.text, verdict.feedback))
    if t == 0:
      budgets = budgets_for(cfg, ok[:, :, 0])
    # Still going: within budget and not yet solved (dcp.active_mask's rule).
    slots = [(p, g) for p, g in slots if not ok[p, g, t] and budgets[p] > t + 1]
    if not slots:
      break
  active = np.asarray(dcp.active_mask(budgets, ok))
  ran = np.zeros_like(active)
  for r in records:
    ran[r.p, r.g, r.t] = True
  assert np.array_equal(active, ran), 'driver and dcp.active_mask disagree'
  return Rollout(list(task_ids), records, ok, active, budgets, speed, calls)


def harness_prompts(ro: Rollout) -> np.ndarray:
  """bool [P]: prompts with a `harness_error` verdict in any turn.

  Such a verdict is the environment's failure, not the model's (design.md):
  its group's ranks would be wrong, so the whole group gets no gradient.
  """
  bad_P = np.zeros((len(ro.task_ids),), bool)
  for r in ro.records:
    if getattr(r.verdict, 'status', None) == 'harness_error':
      bad_P[r.p] = True
  return bad_P


def advantages(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  """A[p,g,t] for the config's mode and reward, negatives weighed by
  `negative_weight`; zero on inactive turns and on groups the environment
  failed (`harness_prompts`)."""
  adv_PGT = np.array(adv_lib.weigh_negatives(_advantages(ro, cfg),
                                             cfg.negative_weight), np.float32)
  adv_PGT[harness_prompts(ro)] = 0.0
  return adv_PGT


def _advantages(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  if cfg.mode == 'grpo_single_turn':
    return np.asarray(baselines.grpo_single_turn_advantages(
        ro.ok_PGT[:, :, 0]))[:, :, None]
  if cfg.mode == 'multiturn_full':
    return np.asarray(baselines.multiturn_full_advantages(
        ro.ok_PGT, ro.active_PGT, cfg.gamma))
  return np.asarray(adv_lib.leap_turn_advantages(
      _leap_rewards(ro, cfg), dcp.turns_used(ro.active_PGT), cfg.turns,
      cfg.gamma))


def _leap_rewards(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  """r[p,g]: the rank reward (or its speed tie-break variant)."""
  k_PG = rewards.first_success_turn(ro.ok_PGT, ro.active_PGT)
  if cfg.reward == 'speed_tiebreak':
    s_PG = rewards.speedup_at_first_success(ro.speedup_PGT, k_PG)
    return np.asarray(rewards.speed_tiebreak_rewards(k_PG, s_PG, cfg.turns,
                                                     cfg.speed_band))
  # rank; speed_gate already changed what ok means
  return np.asarray(rewards.rank_rewards(k_PG, cfg.turns))


def turn_rewards(ro: Rollout, cfg: RLConfig) -> np.ndarray:
  """r[p,g,t]: the reward each turn's advantage is made from, for reading
  (rollout dumps): leap the trajectory's rank reward (speed tie-break
  included) on each of its turns, multiturn_full the discounted return R_t,
  grpo_single_turn the binary reward; NaN on turns not run."""
  if cfg.mode == 'grpo_single_turn':
    r_PGT = np.asarray(baselines.binary_rewards(ro.ok_PGT[:, :, :1]))
  elif cfg.mode == 'multiturn_full':
    r_PGT = np.asarray(baselines.turn_returns(ro.ok_PGT, ro.active_PGT,
                                              cfg.gamma))
  else:
    r_PGT = np.broadcast_to(_leap_rewards(ro, cfg)[:, :, None],
                            ro.ok_PGT.shape)
  out_PGT = np.full(ro.ok_PGT.shape, np.nan, np.float32)
  t = r_PGT.shape[-1]
  out_PGT[:, :, :t] = np.where(ro.active_PGT[:, :, :t], r_PGT, np.nan)
  return out_PGT


def training_samples(ro: Rollout, adv_PGT: np.ndarray) -> list[TurnSample]:
  """Every turn is one sample; the prompt (history, feedback) has no loss."""
  return [TurnSample(r.prompt_ids, list(r.completion.token_ids),
                     np.asarray(r.completion.logprobs, np.float32),
                     float(adv_PGT[r.p, r.g, r.t]), r.p, r.g, r.t)
          for r in ro.records]

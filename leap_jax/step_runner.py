"""One training step: rollout, advantages, metrics, the GRPO update.

P tasks (the trainer draws them from its task stream), G samples each,
the environment's verdicts, DCP budgets and later turns
(leap_jax.rl.rollout), per-turn advantages, length-bucketed batches,
`rl.epochs` x `rl.mini_batches` optimizer steps. With several processes each
rolls out its share of the prompts with its own sampler copy and pool; the
parts are merged, so every process computes the same rewards and batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np

from leap_jax import debug_metrics, distributed, rollout_dump
from leap_jax.rl import batching, metrics as metrics_lib, rollout
from leap_jax.rl import rollout_merge, train_step
from leap_jax.rl.config import RLConfig


class Stopwatch:
  """Seconds per phase, accumulated by wrapped callables."""

  def __init__(self):
    self.seconds: dict[str, float] = {}

  def wrap(self, name: str, fn: Callable) -> Callable:
    def timed(*args, **kwargs):
      start = time.monotonic()
      try:
        return fn(*args, **kwargs)
      finally:
        self.seconds[name] = (self.seconds.get(name, 0.0)
                              + time.monotonic() - start)
    return timed


class _Proxy:
  def __init__(self, **methods):
    self.__dict__.update(methods)


def _mismatch(logps: list[Any], batches: list[dict[str, Any]]) -> dict[str, float]:
  mask = np.concatenate([np.asarray(b["mask"]).ravel() for b in batches])
  trainer = np.concatenate([np.asarray(lp).ravel() for lp in logps])
  sampler = np.concatenate([np.asarray(b["sampler_logp"]).ravel()
                            for b in batches])
  return train_step.logprob_mismatch(trainer, sampler, mask)


def status_counts(ro: rollout.Rollout) -> dict[str, int]:
  counts: dict[str, int] = {}
  for r in ro.records:
    key = str(getattr(r.verdict.status, "value", r.verdict.status))
    counts[key] = counts.get(key, 0) + 1
  return dict(sorted(counts.items()))


def turn1_judged(ro: rollout.Rollout) -> list[int]:
  """Turn-1 samples per prompt the environment judged (not harness_error);
  a later turn's harness_error leaves the turn-1 verdict standing."""
  judged = [0] * len(ro.task_ids)
  for r in ro.records:
    if r.t == 0 and not rollout.is_harness_error(r.verdict):
      judged[r.p] += 1
  return judged


class StepRunner:
  """`runner(state, step, tasks, dump)` -> (state, metrics, dump rows of
  this process's prompts, or None); tasks: the step's P prompts, the same
  on every process."""

  def __init__(self, config: ml_collections.ConfigDict, cfg: RLConfig,
               sampler_policy: Any, env: Any,
               builder: Any, update: train_step.Update, pad_id: int,
               stop_token_ids: list[int],
               refresh_sampler: Callable[[dict[str, Any], int], None]):
    self.config, self.cfg = config, cfg
    self.sampler_policy, self.env, self.builder = sampler_policy, env, builder
    self.update, self.pad_id = update, pad_id
    self.stop_token_ids = set(stop_token_ids or ())
    self.refresh_sampler = refresh_sampler

  def __call__(self, state: dict[str, Any], step: int, tasks: list[str],
               dump: bool = False
               ) -> tuple[dict[str, Any], dict[str, Any], list | None]:
    cfg = self.cfg
    # This process's share of the prompts, and its own sampler copy.
    share = len(tasks) // jax.process_count()
    offset = jax.process_index() * share
    mine = tasks[offset:offset + share]
    watch = Stopwatch()
    policy = _Proxy(sample=watch.wrap("rollout", self.sampler_policy.sample))
    judge = _Proxy(evaluate=watch.wrap("env", self.env.evaluate))
    rng = jax.random.fold_in(jax.random.wrap_key_data(np.asarray(state["rng"])),
                             step)
    if jax.process_count() > 1:
      rng = jax.random.fold_in(rng, jax.process_index())
    local = rollout.rollout(mine, policy, judge, self.builder, cfg, rng)
    ro, extras = rollout_merge.gather(local, watch.seconds)
    # The slowest process sets the pace.
    seconds = {k: max(extra.get(k, 0.0) for extra in extras)
               for k in ("rollout", "env")}
    adv_PGT = rollout.advantages(ro, cfg)
    r_PGT = rollout.turn_rewards(ro, cfg)
    start = time.monotonic()
    samples = rollout.training_samples(ro, adv_PGT)
    timed = self.env.config.timing
    out = metrics_lib.rollout_metrics(
        ro.ok_PGT, ro.active_PGT, ro.budgets_P,
        ro.speedup_PGT if timed else None, cfg.fast_ps if timed else (),
        ro.tokens_generated)
    out.update(turns_sampled=len(ro.records), env_calls=len(ro.records),
               policy_calls=ro.policy_calls,
               trained_samples=sum(s.advantage != 0.0 for s in samples),
               budgets=[int(b) for b in ro.budgets_P], tasks=tasks,
               turn1_ok=[int(n) for n in ro.ok_PGT[:, :, 0].sum(axis=1)],
               turn1_judged=turn1_judged(ro),
               statuses=status_counts(ro))
    out.update(debug_metrics.step_metrics(
        ro, r_PGT, adv_PGT, cfg.max_new_tokens, self.stop_token_ids,
        seconds["rollout"]))
    rows = None
    if dump:
      rows = rollout_dump.rows(local, r_PGT, adv_PGT, step, cfg.max_new_tokens,
                               self.stop_token_ids, p_offset=offset)
    state = self._update(state, samples, step, out)
    out["seconds_rollout"] = seconds["rollout"]
    out["seconds_env"] = seconds["env"]
    out["seconds_update"] = time.monotonic() - start
    return state, out, rows

  def _update(self, state: dict[str, Any], samples: list[Any], step: int,
              out: dict[str, Any]) -> dict[str, Any]:
    """cfg.epochs passes of cfg.mini_batches optimizer steps on `samples`;
    metrics into `out`."""
    cfg, stepped = self.cfg, []
    packed = []
    for epoch in range(cfg.epochs):
      # Same shuffle on every process and on a resumed run.
      rng = np.random.default_rng([self.config.seed, step, epoch])
      for part in batching.split(samples, cfg.mini_batches, rng):
        # Without a KL term rows with A = 0 have no gradient: they count in
        # the token_mean weights but are not computed.
        batches = batching.pack_buckets(part, cfg, self.pad_id,
                                        skip_zero_advantage=not cfg.kl_beta)
        if batches:
          packed.append(batches)
    # Later steps are off-policy: logp_old from the pre-update params
    # (design.md section 3), one extra forward pass. The first step starts
    # from those params, so its own logp (rho = 1) serves.
    packed[1:] = [[dict(b, old_logp=lp) for b, lp in
                   zip(batches, self.update.logprobs(state["params"], batches))]
                  for batches in packed[1:]]
    for batches in packed:
      params, opt_state, upd, logps = self.update(
          state["params"], state["opt_state"], batches)
      state = dict(state, params=params, opt_state=opt_state)
      if not stepped:  # before any step of this rollout: sampler vs trainer
        out.update(_mismatch(logps, batches))
      stepped.append({k: float(distributed.to_host(v)) for k, v in upd.items()})
    if stepped:
      self.refresh_sampler(state, step)
      out.update({k: float(np.mean([u[k] for u in stepped])) for k in stepped[0]})
      out["loss_tokens"] = sum(u["loss_tokens"] for u in stepped)
      out["optimizer_steps"] = len(stepped)
    return state

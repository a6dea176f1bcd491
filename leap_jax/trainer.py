"""The training loop: rollout, rewards, one GRPO update per step, checkpoints.

One step (design.md section 1): P tasks from the resumable task stream, G
samples each, the environment's verdicts, DCP budgets and later turns
(leap_jax.rl.rollout), per-turn advantages, length-bucketed batches, one
jitted update. Checkpoints hold params, optimizer state, RNG, the data
position and the config; step 0 is the starting policy (the warm start), so
evaluate.py can compare against it. SIGTERM (preemption) finishes the step,
saves and exits.

Across processes (jax.distributed, one per host) every process rolls out
its share of the P prompts with its own sampler copy and environment pool;
the rollouts are gathered and merged, so every process computes the same
rewards and global batch; the update runs sharded over the mesh of all
processes' devices. Only process 0 writes metrics, events and plots; all
processes write the checkpoint (orbax), which restores onto any process
count.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np

from leap_jax import distributed, layout, plots, policy as policy_lib
from leap_jax import run_log, task_stream
from leap_jax.checkpoints import Checkpoints
from leap_jax.env import environment, settings
from leap_jax.rl import batching, metrics as metrics_lib, rollout
from leap_jax.rl import rollout_merge, train_step
from leap_jax.rl.config import RLConfig
from leap_jax.rl.prompts import PromptBuilder

_LOG = logging.getLogger(__name__)
# Changing these between a run and its resumption is expected.
RESUMABLE_CHANGES = ("num_steps", "checkpoint_every", "workdir",
                     "debug_param_digest")
# Changing these would resume a different run: an error.
FIXED_ON_RESUME = ("seed", "train_tasks", "model.", "sft.", "variant")


def rl_config(config: ml_collections.ConfigDict) -> RLConfig:
  return RLConfig(**config.rl.to_dict())


def check_config(config: ml_collections.ConfigDict) -> None:
  """ValueError naming the first bad value (RLConfig checks its own)."""
  for name in ("num_steps", "checkpoint_every"):
    if config[name] < 1:
      raise ValueError(f"config.{name} must be >= 1, got {config[name]}")
  rl = config.rl
  if rl.num_prompts < 1:
    raise ValueError(f"config.rl.num_prompts must be >= 1, got {rl.num_prompts}")
  if rl.num_prompts % jax.process_count():
    raise ValueError(f"config.rl.num_prompts ({rl.num_prompts}) must be a "
                     f"multiple of the process count ({jax.process_count()}): "
                     "each process rolls out an equal share")
  if rl.max_prompt_tokens + rl.max_new_tokens > rl.max_seq_len:
    raise ValueError(
        f"config.rl.max_prompt_tokens + max_new_tokens ({rl.max_prompt_tokens} "
        f"+ {rl.max_new_tokens}) must fit config.rl.max_seq_len "
        f"({rl.max_seq_len}): the trainer must see the context the sampler saw")
  rl_config(config)


def make_env(config: ml_collections.ConfigDict, trusted: bool = False):
  """The kernel environment; `trusted` reuses workers (warm-start mutants)."""
  return environment.KernelEnv(settings.env_config_from(
      config.env, jobs_per_worker=64 if trusted else 1))


def abstract_state(params: Any, optimizer: Any,
                   mesh: jax.sharding.Mesh | None = None) -> dict[str, Any]:
  """Shapes and shardings of a checkpoint's state: params, optimizer state
  (laid out as the trainer lays out optimizer.init(params)), RNG key data
  (host)."""
  params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(
      x.shape, x.dtype, sharding=getattr(x, "sharding", None)), params)
  if mesh is not None:
    opt_state = layout.abstract_opt_state(optimizer, params, mesh)
  else:
    opt_state = jax.jit(optimizer.init).eval_shape(params)
  return {"params": params, "opt_state": opt_state,
          "rng": np.zeros((2,), np.uint32)}


class _Stopwatch:
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


def _status_counts(ro: rollout.Rollout) -> dict[str, int]:
  counts: dict[str, int] = {}
  for r in ro.records:
    key = str(getattr(r.verdict.status, "value", r.verdict.status))
    counts[key] = counts.get(key, 0) + 1
  return dict(sorted(counts.items()))


def config_changes(saved_json: str, config: ml_collections.ConfigDict) -> list[str]:
  """Top-level/nested fields whose value differs from the saved config."""
  saved, now = json.loads(saved_json), json.loads(config.to_json())
  out = []

  def walk(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
      for k in sorted(set(a) | set(b)):
        walk(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    elif a != b and path not in RESUMABLE_CHANGES:
      out.append(f"{path}: {a!r} -> {b!r}")

  walk(saved, now, "")
  return out


class Trainer:
  """Sets up policy, environment and optimizer; `run()` trains to num_steps."""

  def __init__(self, config: ml_collections.ConfigDict, workdir: str,
               print_fn: Callable[[str], None] = functools.partial(print, flush=True)):
    check_config(config)
    self.config, self.workdir = config, os.path.abspath(workdir)
    self.cfg = rl_config(config)
    self.writer = jax.process_index() == 0
    self.print = print_fn if self.writer else (lambda _: None)
    self.task_ids = task_stream.training_tasks(config.train_tasks)
    self.env = make_env(config)
    try:
      self._setup()
    except BaseException:
      self.env.close()
      raise

  def _setup(self) -> None:
    config = self.config
    self.policy = policy_lib.load(config, self.task_ids,
                                  lambda: make_env(config, trusted=True))
    self.print(f"policy: {self.policy.description}")
    self.mesh = layout.training_mesh(config)
    self.param_shardings = layout.param_shardings(self.policy.model_cfg,
                                                  self.mesh, config)
    self.sampler_shardings = layout.param_shardings(
        self.policy.model_cfg, layout.sampling_mesh(config), config)
    self.print(f"mesh: {dict(self.mesh.shape)} over {jax.process_count()} "
               f"process(es), {jax.device_count()} device(s)")
    self.optimizer = train_step.make_optimizer(self.cfg)
    # The KL term's reference: the policy the run started from (on resume
    # too: policy.load reads the same starting weights), never updated.
    ref_params = None
    if self.cfg.kl_beta > 0:
      ref_params = layout.place_params(self.policy.params,
                                       self.param_shardings, copy=True)
    self.update = train_step.Update(
        train_step.train_graphdef(self.policy.model_cfg, self.cfg.remat),
        self.optimizer, self.cfg, mesh=self.mesh, rules=layout.rules(config),
        ref_params=ref_params)
    self.sampler_policy = self.policy.sampler_policy(self.policy.params,
                                                     self.cfg)
    self.builder = PromptBuilder.from_config(self.policy.tokenizer, self.cfg,
                                             backend=self.env.config.target_backend)
    for task_id in self.task_ids:  # a first prompt over max_prompt_tokens
      self.builder.encode(task_id)  # is a config error: say so now
    self.ckpt = Checkpoints(os.path.join(self.workdir, "checkpoints"),
                            keep_steps=(0,))
    self.log = run_log.RunLog(self.workdir, writer=self.writer)
    self._stop_requested = False

  # -- state ---------------------------------------------------------------

  def _save(self, step: int, state: dict[str, Any], position: int) -> None:
    self.ckpt.save(step, state, {"step": step, "data_position": position,
                                 "config": self.config.to_json()})

  def initial_state(self) -> tuple[dict[str, Any], int, int]:
    """(state, step, data position): the latest checkpoint, or step 0."""
    latest = self.ckpt.latest_step()
    if latest is None:
      params = layout.place_params(self.policy.params, self.param_shardings)
      state = {"params": params,
               "opt_state": layout.init_opt_state(self.optimizer, params,
                                                  self.mesh),
               "rng": np.asarray(jax.random.key_data(
                   jax.random.key(self.config.seed)))}
      self._save(0, state, 0)
      return state, 0, 0
    meta, _ = self.ckpt.read_meta(latest)
    changes = config_changes(meta["config"], self.config)
    fixed = [c for c in changes if c.startswith(FIXED_ON_RESUME)]
    if fixed:
      raise ValueError(f"{self.workdir} holds a run with other settings "
                       f"({fixed[0]}); use another --workdir")
    for change in changes:
      _LOG.warning("resuming with a changed config: %s", change)
    params = distributed.map_with_shardings(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        self.policy.params, self.param_shardings)
    state, meta, step = self.ckpt.restore(
        abstract_state(params, self.optimizer, self.mesh), latest)
    if self.writer:
      dropped = run_log.truncate_after(self.workdir, step)
      self.log.purge_after(step)
      if dropped:
        _LOG.info("dropped %d metrics line(s) past checkpoint %d", dropped,
                  step)
    self.print(f"resuming from {self.ckpt.directory}/{step} "
               f"(data position {meta['data_position']})")
    return state, step, int(meta["data_position"])

  def _refresh_sampler(self, state: dict[str, Any], step: int) -> None:
    """This host's sampler copy of the parameters after `step`."""
    params = distributed.local_copy(state["params"], self.sampler_shardings)
    self.sampler_policy.set_params(params)
    if self.config.debug_param_digest:
      # Every process prints: equal digests mean equal sampler copies.
      print(f"param digest: process {jax.process_index()} step {step} "
            f"{distributed.digest(params)}", flush=True)

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
        batches = batching.pack_buckets(part, cfg, self.policy.pad_id,
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
      self._refresh_sampler(state, step)
      out.update({k: float(np.mean([u[k] for u in stepped])) for k in stepped[0]})
      out["loss_tokens"] = sum(u["loss_tokens"] for u in stepped)
      out["optimizer_steps"] = len(stepped)
    return state

  # -- one step ------------------------------------------------------------

  def step(self, state: dict[str, Any], step: int, position: int
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    cfg = self.cfg
    tasks = task_stream.tasks_at(self.task_ids, self.config.seed, position,
                                 cfg.num_prompts)
    # This process's share of the prompts, and its own sampler copy.
    share = len(tasks) // jax.process_count()
    mine = tasks[jax.process_index() * share:(jax.process_index() + 1) * share]
    watch = _Stopwatch()
    policy = _Proxy(sample=watch.wrap("rollout", self.sampler_policy.sample))
    judge = _Proxy(evaluate=watch.wrap("env", self.env.evaluate))
    rng = jax.random.fold_in(jax.random.wrap_key_data(np.asarray(state["rng"])),
                             step)
    if jax.process_count() > 1:
      rng = jax.random.fold_in(rng, jax.process_index())
    ro = rollout.rollout(mine, policy, judge, self.builder, cfg, rng)
    ro, extras = rollout_merge.gather(ro, watch.seconds)
    seconds = {k: max(extra.get(k, 0.0) for extra in extras)
               for k in ("rollout", "env")}
    adv_PGT = rollout.advantages(ro, cfg)
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
               statuses=_status_counts(ro))
    state = self._update(state, samples, step, out)
    # The slowest process sets the pace.
    out["seconds_rollout"] = seconds["rollout"]
    out["seconds_env"] = seconds["env"]
    out["seconds_update"] = time.monotonic() - start
    return state, out

  # -- the loop --------------------------------------------------------------

  def _on_sigterm(self, *_):
    self._stop_requested = True

  def run(self) -> dict[str, Any]:
    cfg, num_steps = self.cfg, self.config.num_steps
    state, step, position = self.initial_state()
    self._refresh_sampler(state, step)
    previous = signal.signal(signal.SIGTERM, self._on_sigterm)
    times = []
    try:
      while step < num_steps:
        start = time.monotonic()
        step += 1
        state, out = self.step(state, step, position)
        position += cfg.num_prompts
        out["seconds_step"] = time.monotonic() - start
        times.append(out["seconds_step"])
        self.log.write(step, out)
        eta = np.mean(times[-5:]) * (num_steps - step)
        self.print(run_log.progress_line(step, num_steps, out, cfg.turns, eta))
        if (step % self.config.checkpoint_every == 0 or step == num_steps
            or self._stop_requested):
          self._save(step, state, position)
        if self._stop_requested:
          self.print(f"SIGTERM: saved step {step}; rerun to resume")
          break
    finally:
      signal.signal(signal.SIGTERM, previous)
    return self.finish(step)

  def finish(self, step: int) -> dict[str, Any]:
    rows = run_log.read_metrics(self.workdir)
    summary = {"step": step, "workdir": self.workdir}
    if rows:
      quarter = max(1, len(rows) // 4)
      summary["acc@1_first_quarter"] = run_log.mean_of(rows[:quarter], "acc@1")
      summary["acc@1_last_quarter"] = run_log.mean_of(rows[-quarter:], "acc@1")
      if self.writer:
        summary["plots"] = plots.write_plots(
            rows, self.cfg.turns, os.path.join(self.workdir, "plots"))
    return summary

  def close(self) -> None:
    self.log.close()
    self.ckpt.close()
    self.env.close()

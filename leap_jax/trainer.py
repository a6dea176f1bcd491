"""The training loop: steps, evaluations, rollout dumps, checkpoints.

`Trainer(config, workdir).run()` trains to config.num_steps. Per step
(leap_jax.step_runner): rollout, rewards, one GRPO update; then, when due,
the unpruned evaluation (`eval_every`, and before step 1 with
`eval_at_start`), the rollout dump (`rollouts_every`), the metrics line and
an asynchronous checkpoint (the next step runs while it is written).
Checkpoints hold params, optimizer state and RNG as separate items plus
the data position, the task stream's state and the config; step 0 is the starting policy, so
evaluate.py can compare against it. The run resumes from its latest
checkpoint; metrics, events and dumps of steps past it are dropped (those
steps are redone).

SIGTERM on any process stops all of them after the same step
(leap_jax.preemption): one checkpoint, then exit; the rerun resumes there.
Across processes (jax.distributed, one per host) only process 0 writes
metrics, events, dumps, config.json and plots; all processes write the
checkpoint (orbax), which restores onto any process count.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np

from leap_jax import config_report, distributed, evaluation, layout, plots
from leap_jax import policy as policy_lib, preemption, rollout_dump, run_log
from leap_jax import run_state, step_runner, task_stream
from leap_jax.env import environment, settings
from leap_jax.rl import train_step
from leap_jax.rl.config import RLConfig
from leap_jax.rl.prompts import PromptBuilder
from leap_jax.warmstart import store

_LOG = logging.getLogger(__name__)


def rl_config(config: ml_collections.ConfigDict) -> RLConfig:
  return RLConfig(**config.rl.to_dict())


def check_config(config: ml_collections.ConfigDict) -> None:
  """ValueError naming the first bad value (RLConfig checks its own),
  before anything heavy starts: checkpoint paths and task names included."""
  for name in ("num_steps", "checkpoint_every"):
    if config[name] < 1:
      raise ValueError(f"config.{name} must be >= 1, got {config[name]}")
  for name in ("rollouts_every", "eval_every"):
    if config[name] < 0:
      raise ValueError(f"config.{name} must be >= 0 (0: never), got "
                       f"{config[name]}")
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
  task_stream.TaskFilter(**config.task_filter)
  train_tasks = task_stream.training_tasks(config.train_tasks)
  if config.model.source != "embedded":
    policy_lib.model_path(config.model)
  else:
    store.settings(config, train_tasks)  # sft.tasks, sft.self_repair_*
  if config.eval_every or config.eval_at_start:
    if config.eval_samples < 2:
      raise ValueError(f"config.eval_samples must be >= 2, got "
                       f"{config.eval_samples}")
    task_stream.eval_tasks(config.eval_split, config.eval_tasks,
                           config.train_tasks)
  if config.wandb_project and importlib.util.find_spec("wandb") is None:
    raise ValueError("config.wandb_project is set but wandb is not "
                     "installed: pip install -e .[wandb]")


def make_env(config: ml_collections.ConfigDict, trusted: bool = False,
             input_seed: int | None = None):
  """The kernel environment; `trusted` reuses workers (warm-start mutants);
  input_seed fixes each task's trial inputs (warm-start builds; never RL,
  which learns from them; evaluations use KernelEnv.fixed_inputs)."""
  return environment.KernelEnv(settings.env_config_from(
      config.env, jobs_per_worker=64 if trusted else 1, input_seed=input_seed))


def load_policy(config: ml_collections.ConfigDict) -> policy_lib.LoadedPolicy:
  """The policy a run of `config` starts from: its training tasks' warm
  start (made first when sft.dir has none) or its checkpoint's weights."""
  return policy_lib.load(config, task_stream.training_tasks(config.train_tasks),
                         functools.partial(make_env, config))


class Trainer:
  """Sets up policy, environment and optimizer; `run()` trains to num_steps.

  defaults: the variant's config without overrides; the fields that
  differ are printed at start.
  """

  def __init__(self, config: ml_collections.ConfigDict, workdir: str,
               print_fn: Callable[[str], None] = functools.partial(print, flush=True),
               defaults: ml_collections.ConfigDict | None = None):
    check_config(config)
    self.config, self.workdir = config, os.path.abspath(workdir)
    self.defaults = defaults
    self.cfg = rl_config(config)
    self.writer = jax.process_index() == 0
    self.print = print_fn if self.writer else (lambda _: None)
    self.task_ids = task_stream.training_tasks(config.train_tasks)
    self.eval_task_ids = task_stream.eval_tasks(
        config.eval_split, config.eval_tasks, config.train_tasks)
    self.ckpt = run_state.checkpoints(self.workdir)
    self.stop = preemption.StopSignal()
    try:
      self.resume_changes = self._check_resume()
      self.env = make_env(config)
      try:
        self._setup()
      except BaseException:
        self.env.close()
        raise
    except BaseException:
      self.ckpt.close()
      raise

  def _setup(self) -> None:
    config = self.config
    self.policy = policy_lib.load(config, self.task_ids,
                                  functools.partial(make_env, config))
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
    update = train_step.Update(
        train_step.train_graphdef(self.policy.model_cfg, self.cfg.remat),
        self.optimizer, self.cfg, mesh=self.mesh, rules=layout.rules(config),
        ref_params=ref_params)
    self.sampler_policy = self.policy.sampler_policy(self.policy.params,
                                                     self.cfg)
    self.sampler_params = self.policy.params
    builder = PromptBuilder.from_config(self.policy.tokenizer, self.cfg,
                                        backend=self.env.config.target_backend)
    evaluated = config.eval_every or config.eval_at_start
    for task_id in self.task_ids + (self.eval_task_ids if evaluated else []):
      builder.encode(task_id)  # a first prompt over max_prompt_tokens is a
      # config error: say so now
    self.run_step = step_runner.StepRunner(
        config, self.cfg, self.sampler_policy, self.env,
        builder, update, self.policy.pad_id, self.policy.stop_token_ids,
        self._refresh_sampler)
    sinks = []
    if config.wandb_project and self.writer:
      from leap_jax import wandb_writer  # pylint: disable=g-import-not-at-top
      sinks.append(wandb_writer.WandbWriter(
          config.wandb_project, self.workdir, config_report.flatten(config),
          entity=config.wandb_entity))
    self.log = run_log.RunLog(self.workdir, writer=self.writer, sinks=sinks)

  # -- state ---------------------------------------------------------------

  def _save(self, step: int, state: dict[str, Any], position: int) -> float:
    """Starts the checkpoint of `step`; the seconds the call blocked."""
    return self.ckpt.save(step, state, run_state.meta(
        step, position, self.config, self.stream.state()))

  def _stream(self, saved: dict[str, Any] | None) -> task_stream.TaskStream:
    return task_stream.TaskStream(
        self.task_ids, self.config.seed,
        task_stream.TaskFilter(**self.config.task_filter), saved)

  def _report_config(self) -> None:
    if self.defaults is not None:
      lines = config_report.change_lines(self.defaults, self.config)
      variant = self.config.variant or "default"
      self.print(f"config: {len(lines)} field(s) differ from the {variant} "
                 f"variant's defaults" + "".join(f"\n  {l}" for l in lines))
    if self.writer:
      path = config_report.write(self.workdir, self.config)
      self.print(f"config: {path}")

  def _check_resume(self) -> list[str] | None:
    """The allowed config changes against the latest checkpoint (None: no
    checkpoint yet); ValueError naming every field that may not change."""
    latest = self.ckpt.latest_step()
    if latest is None:
      return None
    meta, _ = self.ckpt.read_meta(latest)
    return run_state.check_resume(meta["config"], self.config, self.workdir)

  def initial_state(self) -> tuple[dict[str, Any], int, int]:
    """(state, step, data position): the latest checkpoint, or step 0."""
    latest = self.ckpt.latest_step()
    if latest is None:
      self._report_config()
      self.stream = self._stream(None)
      params = layout.place_params(self.policy.params, self.param_shardings)
      state = {"params": params,
               "opt_state": layout.init_opt_state(self.optimizer, params,
                                                  self.mesh),
               "rng": np.asarray(jax.random.key_data(
                   jax.random.key(self.config.seed)))}
      self._save(0, state, 0)
      return state, 0, 0
    for change in self.resume_changes or ():
      _LOG.warning("resuming with a changed config: %s", change)
    self._report_config()
    params = run_state.abstract_params(self.policy.params,
                                       self.param_shardings)
    state, meta, step = self.ckpt.restore(
        run_state.abstract_state(params, self.optimizer, self.mesh), latest)
    self.stream = self._stream(meta.get("task_stream"))
    if self.writer:
      dropped = run_log.truncate_after(self.workdir, step)
      self.log.purge_after(step)
      purged = rollout_dump.purge_after(self.workdir, step)
      if dropped or purged:
        _LOG.info("dropped %d metrics line(s) and %d rollout dump(s) past "
                  "checkpoint %d", dropped, len(purged), step)
    self.print(f"resuming from {self.ckpt.directory}/{step} "
               f"(data position {meta['data_position']})")
    return state, step, int(meta["data_position"])

  def _refresh_sampler(self, state: dict[str, Any], step: int) -> None:
    """This host's sampler copy of the parameters after `step`."""
    params = distributed.local_copy(state["params"], self.sampler_shardings)
    self.sampler_policy.set_params(params)
    self.sampler_params = params
    if self.config.debug_param_digest:
      # Every process prints: equal digests mean equal sampler copies.
      print(f"param digest: process {jax.process_index()} step {step} "
            f"{distributed.digest(params)}", flush=True)

  # -- evaluation and dumps ------------------------------------------------

  def _eval_due(self, step: int) -> bool:
    every = self.config.eval_every
    return bool(every) and (step % every == 0 or step == self.config.num_steps)

  def evaluate(self, step: int) -> dict[str, Any]:
    """The unpruned evaluation of the current params, as step metrics.
    Samples and trial inputs are fixed by config.seed: every evaluation of a
    run judges the same inputs (`launch/evaluate.py --input_seed` with the
    run's seed, tasks and samples repeats it for a checkpoint, on one
    process: across processes each samples its share of the tasks)."""
    with self.env.fixed_inputs(self.config.seed):
      result = evaluation.evaluate(
          self.policy, self.sampler_params, self.env, self.eval_task_ids,
          self.cfg, self.config.eval_samples, seed=self.config.seed,
          across_processes=True)
    accs = " ".join(f"acc@{t} {result[f'acc@{t}']:.2f}"
                    for t in range(1, result["turns"] + 1))
    self.print(f"eval after step {step} | {accs} | {result['tasks']} "
               f"{self.config.eval_split} tasks x {self.config.eval_samples} "
               f"samples | {result['seconds']:.1f}s")
    return evaluation.as_metrics(result)

  def _dump(self, step: int, rows: list[dict[str, Any]]) -> None:
    rows = rollout_dump.gather(rows)  # a collective: every process calls it
    if self.writer:
      rollout_dump.write(self.workdir, step, rows)

  # -- the loop --------------------------------------------------------------

  def run(self) -> dict[str, Any]:
    """Trains to num_steps. From here SIGTERM is noted, not fatal: all
    processes finish the step, save it and return (before, during set-up,
    it ends the process as usual: no step is lost)."""
    self.stop.install()
    try:
      return self._run()
    finally:
      self.stop.restore()

  def _run(self) -> dict[str, Any]:
    cfg, config = self.cfg, self.config
    num_steps = config.num_steps
    state, step, position = self.initial_state()
    self._refresh_sampler(state, step)
    if step == 0 and config.eval_at_start and not any(
        r["step"] == 0 for r in run_log.read_metrics(self.workdir)):
      self.log.write(0, self.evaluate(0))
    times = []
    while step < num_steps:
      start = time.monotonic()
      step += 1
      dump = bool(config.rollouts_every) and step % config.rollouts_every == 0
      tasks, position, skipped = self.stream.draw(position, cfg.num_prompts)
      state, out, rows = self.run_step(state, step, tasks, dump)
      self.stream.record(tasks, out["turn1_ok"], out["turn1_judged"])
      if config.task_filter.enabled:
        out["tasks_skipped"] = skipped
      # Every process gets the same answer: all stop after this step.
      stop = self.stop.agreed()
      if self._eval_due(step) and not stop:
        out.update(self.evaluate(step))
      if dump:
        self._dump(step, rows)
      if step % config.checkpoint_every == 0 or step == num_steps or stop:
        out["seconds_checkpoint"] = self._save(step, state, position)
      # The training step's wall time; evaluation is timed on its own.
      out["seconds_step"] = (time.monotonic() - start
                             - out.get("seconds_eval", 0.0))
      times.append(out["seconds_step"])
      self.log.write(step, out)
      eta = np.mean(times[-5:]) * (num_steps - step)
      self.print(run_log.progress_line(step, num_steps, out, cfg.turns, eta))
      if stop:
        self.ckpt.wait()
        self.print(f"SIGTERM: stopped after step {step} with its checkpoint "
                   "saved; rerun to resume")
        break
    self.ckpt.wait()
    return self.finish(step)

  def finish(self, step: int) -> dict[str, Any]:
    rows = run_log.read_metrics(self.workdir)
    steps = [r for r in rows if r["step"] > 0]
    summary = {"step": step, "workdir": self.workdir}
    if steps:
      quarter = max(1, len(steps) // 4)
      summary["acc@1_first_quarter"] = run_log.mean_of(steps[:quarter], "acc@1")
      summary["acc@1_last_quarter"] = run_log.mean_of(steps[-quarter:], "acc@1")
      evals = [r for r in rows if "eval/acc@1" in r]
      if evals:
        summary["eval"] = {k: v for k, v in evals[-1].items()
                           if k.startswith("eval/") and k != "eval/levels"}
        summary["eval"]["step"] = evals[-1]["step"]
      if self.writer:
        summary["plots"] = plots.write_plots(
            rows, self.cfg.turns, os.path.join(self.workdir, "plots"))
    return summary

  def close(self) -> None:
    self.log.close()
    self.ckpt.close()  # waits for a save in flight
    self.env.close()

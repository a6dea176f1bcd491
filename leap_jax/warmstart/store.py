"""The warm start on disk: made once, checked against the config, loaded.

DIR/tokenizer/      the embedded tokenizer (a transformers directory)
DIR/params/<steps>/ the fine-tuned parameters (orbax): after the first
                    stage, and after the self-repair stage when there is one
DIR/stage1.json     the first stage's info, so a crash in the second one
                    does not lose it (make() resumes from it)
DIR/warmstart.json  what made it (settings, task ids), its losses and timings;
                    written last, so a directory without it is incomplete.

Stages: (1) mutants judged by the environment, the tokenizer (on the task
texts, and with sft.tokenizer_feedback on the mutants' feedback too),
solution and repair examples (with sft.repair_only_tasks, repair examples
alone for those specs), fine-tuning from random init; (2, when
sft.self_repair_steps > 0) self_repair.py: the stage-1 policy's own turn-1
failures on training specs it did not see, with their real feedback,
fine-tuned on beside the solutions.

A directory made with other settings is never used silently: loading it is
an error naming the first setting that differs.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_collections

import kernels_pallas

from leap_jax.checkpoints import Checkpoints
from leap_jax.model import config as model_config
from leap_jax.model import transformer
from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.warmstart import corpus, self_repair, sft, sft_data
from leap_jax.warmstart.tasks import (repair_only_tasks, self_repair_tasks,
                                      warm_start_tasks)
from leap_jax.warmstart import tokenizer as embedded_tokenizer

_LOG = logging.getLogger(__name__)
INFO_FILE = "warmstart.json"
STAGE1_FILE = "stage1.json"
OWN_ENTRIES = ("tokenizer", "params", INFO_FILE, INFO_FILE + ".tmp",
               STAGE1_FILE, STAGE1_FILE + ".tmp")
MODEL_FIELDS = ("vocab_size", "embed_dim", "num_layers", "num_heads",
                "num_kv_heads", "head_dim", "mlp_dim", "max_position", "dtype")
SFT_FIELDS = ("steps", "batch_tokens", "learning_rate", "warmup_steps", "seq_len")
DATA_FIELDS = ("repairs_per_task", "split_lines", "tokenizer_feedback")
SELF_REPAIR_FIELDS = ("self_repair_steps", "self_repair_samples",
                      "self_repair_learning_rate")
# Stage 2's answers come from its own sampling: these draw them.
SELF_REPAIR_SEED_OFFSET = 1000
SELF_REPAIR_PROMPTS_PER_CALL = 16
# Settings added after warm starts were made: a stored warm start without
# one was made with its default.
ADDED_DEFAULTS = {"sft": {"split_lines": False, "tokenizer_feedback": False}}


def warm_start_seed(config: ml_collections.ConfigDict) -> int:
  """The seed the warm start is made with: sft.seed, or config.seed when
  that is < 0 (so seeds of an RL comparison can share one warm start)."""
  seed = config.sft.get("seed", -1)
  return config.seed if seed < 0 else seed


class WarmStartError(RuntimeError):
  """The warm start is missing, incomplete or made with other settings."""


def embedded_model_config(model: ml_collections.ConfigDict) -> model_config.ModelConfig:
  """The embedded policy's Llama from the config's `model` block."""
  return model_config.ModelConfig(
      **{f: model[f] for f in MODEL_FIELDS}, tie_embeddings=True,
      family="llama", attention=model.attention)


def settings(config: ml_collections.ConfigDict,
             run_task_ids: Sequence[str]) -> dict[str, Any]:
  """Everything that determines the warm start's result (run_task_ids: the
  run's training tasks). Stage 2's block only when it is on, so warm starts
  made before it existed still load."""
  sft_block = {f: config.sft.get(f, ADDED_DEFAULTS["sft"].get(f))
               for f in SFT_FIELDS + DATA_FIELDS}
  out = {"seed": warm_start_seed(config),
         "model": {f: config.model[f] for f in MODEL_FIELDS},
         # Params saved in another layout (per-layer, before the layers
         # were stacked) cannot be restored: refused by name.
         "param_layout": transformer.PARAM_LAYOUT,
         "sft": sft_block,
         "task_ids": warm_start_tasks(config, run_task_ids)}
  # Only when set, so warm starts made before the setting still load.
  repair_only = repair_only_tasks(config, run_task_ids)
  if repair_only:
    out["repair_only_task_ids"] = repair_only
  repair_tasks = self_repair_tasks(config, run_task_ids)
  if repair_tasks:
    out["self_repair"] = {**{f: config.sft[f] for f in SELF_REPAIR_FIELDS},
                          "task_ids": repair_tasks}
  return out


def _stage1_settings(full: dict[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in full.items() if k != "self_repair"}


def _first_difference(want: Any, have: Any, path: str = "") -> str | None:
  if isinstance(want, dict) and isinstance(have, dict):
    for key in sorted(set(want) | set(have)):
      diff = _first_difference(want.get(key), have.get(key), f"{path}.{key}")
      if diff:
        return diff
    return None
  return None if want == have else f"{path.lstrip('.')}: {have!r} there, {want!r} now"


def read_info(directory: str, name: str = INFO_FILE) -> dict[str, Any] | None:
  path = os.path.join(directory, name)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def _write_info(directory: str, name: str, info: dict[str, Any]) -> None:
  tmp = os.path.join(directory, name + ".tmp")
  with open(tmp, "w") as f:
    json.dump(info, f, indent=1)
  os.replace(tmp, os.path.join(directory, name))


def load(directory: str, config: ml_collections.ConfigDict,
         task_ids: Sequence[str]):
  """(model config, graphdef, params, tokenizer) of a finished warm start."""
  info = read_info(directory)
  if info is None:
    raise WarmStartError(f"no finished warm start in {directory} "
                         f"(make one: python launch/sft.py --config=...)")
  diff = _first_difference(settings(config, task_ids),
                           _with_added_defaults(info["settings"]))
  if diff:
    raise WarmStartError(
        f"the warm start in {directory} was made with other settings ({diff}); "
        f"delete it or set --config.sft.dir to another directory")
  return _restore(directory, config.model)


def make(directory: str, config: ml_collections.ConfigDict,
         task_ids: Sequence[str], env: Any,
         make_repair_env: Callable[[], Any] | None = None) -> dict[str, Any]:
  """Makes the warm start in `directory`; returns its info.

  task_ids: the run's training tasks. env judges stage 1's own (trusted)
  mutants; make_repair_env() opens the environment for stage 2's policy
  answers (untrusted: a fresh worker per job), needed when stage 2 is on.
  A directory holding a finished stage 1 of these settings resumes there.
  """
  start = time.monotonic()
  want = settings(config, task_ids)
  corpus.check_training_only(want["task_ids"])
  corpus.check_training_only(want.get("repair_only_task_ids", []))
  if "self_repair" in want:
    corpus.check_training_only(want["self_repair"]["task_ids"])
    if make_repair_env is None:
      raise ValueError("sft.self_repair_steps > 0 needs an environment for "
                       "the policy's answers (make_repair_env)")
  stage1 = _resumable_stage1(directory, want)
  if stage1 is None:
    _clear(directory)
    stage1 = _stage1(directory, config, want, env)
  else:
    _LOG.info("warm start: stage 1 found in %s (%.0f s then), resuming",
              directory, stage1["seconds_total"])
    _drop_params_after(directory, config.sft.steps)
  info = {"settings": want, **stage1}
  stage2_start = time.monotonic()
  if "self_repair" in want:
    with make_repair_env() as repair_env:
      info["self_repair"] = _stage2(directory, config, want, repair_env)
  info["seconds_total"] = (stage1["seconds_total"]
                           + time.monotonic() - stage2_start)
  _write_info(directory, INFO_FILE, info)
  _LOG.info("warm start: %.0f s in all (this call %.0f s)",
            info["seconds_total"], time.monotonic() - start)
  return info


def _clear(directory: str) -> None:
  if os.path.exists(directory):
    strangers = set(os.listdir(directory)) - set(OWN_ENTRIES)
    if strangers:
      raise WarmStartError(
          f"{directory} holds other files ({sorted(strangers)[:3]}); point "
          f"--config.sft.dir at an empty or new directory")
    shutil.rmtree(directory)  # an incomplete earlier attempt


def _with_added_defaults(stored: dict[str, Any]) -> dict[str, Any]:
  return {**stored, **{block: {**defaults, **stored.get(block, {})}
                       for block, defaults in ADDED_DEFAULTS.items()}}


def _resumable_stage1(directory: str, want: dict[str, Any]
                      ) -> dict[str, Any] | None:
  stage1 = read_info(directory, STAGE1_FILE)
  if stage1 is None or _first_difference(
      _stage1_settings(want), _with_added_defaults(stage1.pop("settings"))):
    return None
  return stage1


def _params_dir(directory: str) -> str:
  return os.path.join(directory, "params")


def _drop_params_after(directory: str, step: int) -> None:
  """Removes params saved after `step` (a stage 2 that crashed after its
  save, before warmstart.json): stage 2 saves its step anew."""
  for name in os.listdir(_params_dir(directory)):
    if name.isdigit() and int(name) > step:
      shutil.rmtree(os.path.join(_params_dir(directory), name))


def _stage1(directory: str, config: ml_collections.ConfigDict,
            want: dict[str, Any], env: Any) -> dict[str, Any]:
  """Tokenizer, SFT data (real env feedback), fine-tuning from init."""
  start = time.monotonic()
  task_ids, seed = want["task_ids"], want["seed"]
  judged_ids = task_ids + want.get("repair_only_task_ids", [])
  tasks = [kernels_pallas.get_task(t) for t in judged_ids]
  t = time.monotonic()
  # Judged before the tokenizer is trained: their feedback may train it.
  judged = sft_data.judge(env, judged_ids, seed, config.sft.repairs_per_task,
                          progress=_LOG.info)
  texts = corpus.task_texts(tasks)
  if config.sft.get("tokenizer_feedback", False):
    texts += corpus.feedback_texts(judged)
  tokenizer = embedded_tokenizer.train(
      texts, config.model.vocab_size, os.path.join(directory, "tokenizer"),
      split_lines=config.sft.get("split_lines", False))
  stop_id = embedded_tokenizer.stop_token_ids(tokenizer)[0]
  _LOG.info("warm start: tokenizer of %d tokens trained", len(tokenizer))
  examples = sft_data.build(tokenizer, task_ids, judged, stop_id)
  seconds_data = time.monotonic() - t
  kinds = collections.Counter(e.kind for e in examples)
  _LOG.info("warm start: %d examples (%s) in %.0f s", len(examples),
            ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), seconds_data)
  cfg = embedded_model_config(config.model).replace(vocab_size=len(tokenizer))
  graphdef, params = transformer.init(cfg, seed)
  params = jax.tree.map(jax.numpy.asarray, params)
  sft_cfg = sft.SFTConfig(**{f: config.sft[f] for f in SFT_FIELDS},
                          seed=seed)
  t = time.monotonic()
  params, losses = sft.train(graphdef, params, examples, sft_cfg,
                             pad_id=tokenizer.pad_token_id)
  seconds_sft = time.monotonic() - t
  ckpt = Checkpoints(_params_dir(directory), this_process_only=True)
  ckpt.save(sft_cfg.steps, params, {"losses": losses})
  ckpt.close()
  info = {"examples": dict(sorted(kinds.items())), **_loss_summary(losses),
          "seconds_data": seconds_data, "seconds_sft": seconds_sft,
          "seconds_total": time.monotonic() - start}
  _write_info(directory, STAGE1_FILE,
              {"settings": _stage1_settings(want), **info})
  _LOG.info("warm start: answer loss %.3f -> %.3f nats/token, stage 1 %.0f s",
            info["loss_first_quarter"], info["loss_last_quarter"],
            info["seconds_total"])
  return info


def _loss_summary(losses: Sequence[float]) -> dict[str, float]:
  quarter = max(1, len(losses) // 4)
  return {"loss_first_quarter": sum(losses[:quarter]) / quarter,
          "loss_last_quarter": sum(losses[-quarter:]) / quarter}


def _stage2(directory: str, config: ml_collections.ConfigDict,
            want: dict[str, Any], repair_env: Any) -> dict[str, Any]:
  """Self-repair: stage 1's own failures -> solutions, beside replayed
  solution examples, fine-tuned on from stage 1's params."""
  from leap_jax import policy as policy_lib  # pylint: disable=g-import-not-at-top  (policy imports store)
  from leap_jax.rl.config import RLConfig  # pylint: disable=g-import-not-at-top
  cfg, graphdef, params, tokenizer = _restore(directory, config.model,
                                              config.sft.steps)
  stops = embedded_tokenizer.stop_token_ids(tokenizer)
  loaded = policy_lib.LoadedPolicy(cfg, graphdef, params, tokenizer, stops,
                                   tokenizer.pad_token_id, "stage 1")
  block = want["self_repair"]
  t = time.monotonic()
  repairs, statuses = self_repair.collect(
      loaded, params, repair_env, block["task_ids"],
      RLConfig(**config.rl.to_dict()), block["self_repair_samples"],
      seed=want["seed"] + SELF_REPAIR_SEED_OFFSET,
      prompts_per_call=SELF_REPAIR_PROMPTS_PER_CALL, progress=_LOG.info)
  seconds_collect = time.monotonic() - t
  solutions = [sft_data.solution_example(tokenizer, task_id, stops[0])
               for task_id in want["task_ids"]]
  _LOG.info("warm start: %d self-repair examples from %d turn-1 answers %s "
            "in %.0f s", len(repairs), sum(statuses.values()), statuses,
            seconds_collect)
  sft_cfg = sft.SFTConfig(
      steps=block["self_repair_steps"], batch_tokens=config.sft.batch_tokens,
      learning_rate=block["self_repair_learning_rate"],
      warmup_steps=config.sft.warmup_steps, seq_len=config.sft.seq_len,
      seed=want["seed"] + 1)
  t = time.monotonic()
  params, losses = sft.train(graphdef, params, repairs + solutions, sft_cfg,
                             pad_id=tokenizer.pad_token_id)
  seconds_sft = time.monotonic() - t
  ckpt = Checkpoints(_params_dir(directory), this_process_only=True)
  ckpt.save(config.sft.steps + sft_cfg.steps, params, {"losses": losses})
  ckpt.close()
  info = {"turn1_statuses": statuses,
          "examples": {self_repair.KIND: len(repairs),
                       "solution": len(solutions)},
          **_loss_summary(losses), "seconds_collect": seconds_collect,
          "seconds_sft": seconds_sft}
  _LOG.info("warm start: self-repair loss %.3f -> %.3f nats/token in %.0f s",
            info["loss_first_quarter"], info["loss_last_quarter"], seconds_sft)
  return info


def _restore(directory: str, model: ml_collections.ConfigDict,
             step: int | None = None):
  """(model config, graphdef, params, tokenizer): params of `step`
  (default: the latest, the finished warm start's)."""
  tokenizer = tokenizer_lib.load(os.path.join(directory, "tokenizer"))
  cfg = embedded_model_config(model).replace(vocab_size=len(tokenizer))
  graphdef, abstract = transformer.abstract_model(cfg)
  ckpt = Checkpoints(_params_dir(directory), this_process_only=True)
  try:
    params, _, _ = ckpt.restore(abstract, step)
  finally:
    ckpt.close()
  return cfg, graphdef, params, tokenizer


def ensure(directory: str, config: ml_collections.ConfigDict,
           task_ids: Sequence[str], make_env: Callable[..., Any]):
  """load(), making the warm start first when the directory has none;
  make_env(trusted=..., input_seed=...) opens an environment (trainer.
  make_env's knobs)."""
  if read_info(directory) is None:
    _LOG.info("no warm start in %s: making it (launch/sft.py does the same)",
              directory)
    # Trial inputs fixed by the seed: with fresh ones every build judged the
    # same mutants with other error figures in their feedback, so two builds
    # of one config trained on different text (WORKSPACE.md, stop 32).
    seed = warm_start_seed(config)
    with make_env(trusted=True, input_seed=seed) as env:
      make(directory, config, task_ids, env,
           make_repair_env=lambda: make_env(trusted=False, input_seed=seed))
  return load(directory, config, task_ids)

"""The warm start on disk: made once, checked against the config, loaded.

DIR/tokenizer/      the embedded tokenizer (a transformers directory)
DIR/params/<steps>/ the fine-tuned parameters (orbax)
DIR/warmstart.json  what made it (settings, task ids), its losses and timings;
                    written last, so a directory without it is incomplete.

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
from leap_jax.warmstart import corpus, sft, sft_data
from leap_jax.warmstart import tokenizer as embedded_tokenizer

_LOG = logging.getLogger(__name__)
INFO_FILE = "warmstart.json"
OWN_ENTRIES = ("tokenizer", "params", INFO_FILE, INFO_FILE + ".tmp")
MODEL_FIELDS = ("vocab_size", "embed_dim", "num_layers", "num_heads",
                "num_kv_heads", "head_dim", "mlp_dim", "max_position", "dtype")
SFT_FIELDS = ("steps", "batch_tokens", "learning_rate", "warmup_steps", "seq_len")
DATA_FIELDS = ("repairs_per_task", "split_lines")
# Settings added after warm starts were made: a stored warm start without
# one was made with its default.
ADDED_DEFAULTS = {"sft": {"split_lines": False}}


class WarmStartError(RuntimeError):
  """The warm start is missing, incomplete or made with other settings."""


def embedded_model_config(model: ml_collections.ConfigDict) -> model_config.ModelConfig:
  """The embedded default's Llama from the config's `model` block."""
  return model_config.ModelConfig(
      **{f: model[f] for f in MODEL_FIELDS}, tie_embeddings=True,
      family="llama", attention=model.attention)


def warm_start_tasks(config: ml_collections.ConfigDict,
                     run_task_ids: Sequence[str]) -> list[str]:
  """What the warm start learns from: the task set config.sft.tasks
  (training split only), or the run's training tasks when it is empty."""
  spec = config.sft.get("tasks", "")
  if not spec:
    return list(run_task_ids)
  try:
    return kernels_pallas.resolve_tasks(spec, split="train")
  except ValueError as e:
    raise ValueError(f"sft.tasks: {e}") from None


def settings(config: ml_collections.ConfigDict,
             task_ids: Sequence[str]) -> dict[str, Any]:
  """Everything that determines the warm start's result (task_ids: the
  warm start's own, warm_start_tasks)."""
  sft_block = {f: config.sft.get(f, ADDED_DEFAULTS["sft"].get(f))
               for f in SFT_FIELDS + DATA_FIELDS}
  return {"seed": config.seed,
          "model": {f: config.model[f] for f in MODEL_FIELDS},
          # Params saved in another layout (per-layer, before the layers
          # were stacked) cannot be restored: refused by name.
          "param_layout": transformer.PARAM_LAYOUT,
          "sft": sft_block,
          "task_ids": list(task_ids)}


def _first_difference(want: Any, have: Any, path: str = "") -> str | None:
  if isinstance(want, dict) and isinstance(have, dict):
    for key in sorted(set(want) | set(have)):
      diff = _first_difference(want.get(key), have.get(key), f"{path}.{key}")
      if diff:
        return diff
    return None
  return None if want == have else f"{path.lstrip('.')}: {have!r} there, {want!r} now"


def read_info(directory: str) -> dict[str, Any] | None:
  path = os.path.join(directory, INFO_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def load(directory: str, config: ml_collections.ConfigDict,
         task_ids: Sequence[str]):
  """(model config, graphdef, params, tokenizer) of a finished warm start."""
  info = read_info(directory)
  if info is None:
    raise WarmStartError(f"no finished warm start in {directory} "
                         f"(make one: python launch/sft.py --config=...)")
  stored = info["settings"]
  for block, defaults in ADDED_DEFAULTS.items():
    stored[block] = {**defaults, **stored.get(block, {})}
  diff = _first_difference(
      settings(config, warm_start_tasks(config, task_ids)), stored)
  if diff:
    raise WarmStartError(
        f"the warm start in {directory} was made with other settings ({diff}); "
        f"delete it or set --config.sft.dir to another directory")
  tokenizer = tokenizer_lib.load(os.path.join(directory, "tokenizer"))
  cfg = embedded_model_config(config.model).replace(vocab_size=len(tokenizer))
  graphdef, abstract = transformer.abstract_model(cfg)
  ckpt = Checkpoints(os.path.join(directory, "params"),
                     this_process_only=True)
  try:
    params, _, _ = ckpt.restore(abstract)
  finally:
    ckpt.close()
  return cfg, graphdef, params, tokenizer


def make(directory: str, config: ml_collections.ConfigDict,
         task_ids: Sequence[str], env: Any) -> dict[str, Any]:
  """Tokenizer, SFT data (real env feedback), fine-tuning; returns the info."""
  start = time.monotonic()
  task_ids = warm_start_tasks(config, task_ids)
  corpus.check_training_only(task_ids)
  if os.path.exists(directory):
    strangers = set(os.listdir(directory)) - set(OWN_ENTRIES)
    if strangers:
      raise WarmStartError(
          f"{directory} holds other files ({sorted(strangers)[:3]}); point "
          f"--config.sft.dir at an empty or new directory")
    shutil.rmtree(directory)  # an incomplete earlier attempt
  tasks = [kernels_pallas.get_task(t) for t in task_ids]
  tokenizer = embedded_tokenizer.train(
      corpus.task_texts(tasks), config.model.vocab_size,
      os.path.join(directory, "tokenizer"),
      split_lines=config.sft.get("split_lines", False))
  stop_id = embedded_tokenizer.stop_token_ids(tokenizer)[0]
  _LOG.info("warm start: tokenizer of %d tokens trained", len(tokenizer))
  t = time.monotonic()
  examples = sft_data.build(tokenizer, env, task_ids, stop_id, config.seed,
                            config.sft.repairs_per_task)
  seconds_data = time.monotonic() - t
  kinds = collections.Counter(e.kind for e in examples)
  _LOG.info("warm start: %d examples (%s) in %.0f s", len(examples),
            ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), seconds_data)
  cfg = embedded_model_config(config.model).replace(vocab_size=len(tokenizer))
  graphdef, params = transformer.init(cfg, config.seed)
  params = jax.tree.map(jax.numpy.asarray, params)
  sft_cfg = sft.SFTConfig(**{f: config.sft[f] for f in SFT_FIELDS},
                          seed=config.seed)
  t = time.monotonic()
  params, losses = sft.train(graphdef, params, examples, sft_cfg,
                             pad_id=tokenizer.pad_token_id)
  seconds_sft = time.monotonic() - t
  ckpt = Checkpoints(os.path.join(directory, "params"),
                     this_process_only=True)
  ckpt.save(sft_cfg.steps, params, {"losses": losses})
  ckpt.close()
  quarter = max(1, len(losses) // 4)
  info = {"settings": settings(config, task_ids),
          "examples": dict(sorted(kinds.items())),
          "loss_first_quarter": sum(losses[:quarter]) / quarter,
          "loss_last_quarter": sum(losses[-quarter:]) / quarter,
          "seconds_data": seconds_data, "seconds_sft": seconds_sft,
          "seconds_total": time.monotonic() - start}
  tmp = os.path.join(directory, INFO_FILE + ".tmp")
  with open(tmp, "w") as f:
    json.dump(info, f, indent=1)
  os.replace(tmp, os.path.join(directory, INFO_FILE))
  _LOG.info("warm start: answer loss %.3f -> %.3f nats/token, %.0f s in all",
            info["loss_first_quarter"], info["loss_last_quarter"],
            info["seconds_total"])
  return info


def ensure(directory: str, config: ml_collections.ConfigDict,
           task_ids: Sequence[str], make_env: Callable[[], Any]):
  """load(), making the warm start first when the directory has none."""
  if read_info(directory) is None:
    _LOG.info("no warm start in %s: making it (launch/sft.py does the same)",
              directory)
    with make_env() as env:
      make(directory, config, task_ids, env)
  return load(directory, config, task_ids)

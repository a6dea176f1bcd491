"""Text in, text out: checkpoint + tokenizer + Sampler wired together."""

import os
from typing import Any, Sequence

from leap_jax.model import sampler as sampler_lib
from leap_jax.model.paths import check_model_path
from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.model import weights


class TextGenerator:
  """A loaded model and tokenizer that complete text prompts."""

  def __init__(self, path: str | os.PathLike, mesh: Any = None):
    path = check_model_path(path)
    graphdef, state, self.config = weights.load(path, mesh=mesh)
    self.tokenizer = tokenizer_lib.load(path)
    pad = self.tokenizer.pad_token_id
    self.sampler = sampler_lib.Sampler(graphdef, state, self.config,
                                       pad_id=0 if pad is None else pad)
    self.stop_ids = tokenizer_lib.stop_ids(self.tokenizer,
                                           self.config.eos_token_ids)

  def encode(self, text: str, chat: bool = False) -> list[int]:
    return tokenizer_lib.encode(self.tokenizer, text, chat=chat)

  def complete(self, prompts: Sequence[str], chat: bool = False,
               max_new_tokens: int = 128, temperature: float = 0.0,
               top_p: float = 1.0, top_k: int = 0, num_samples: int = 1,
               seed: int = 0) -> list[dict[str, Any]]:
    """One dict per sample, prompt-major: tokens, text, prompt_tokens."""
    prompt_ids = [self.encode(p, chat) for p in prompts]
    batch = self.sampler.generate(
        prompt_ids, num_samples=num_samples, max_new_tokens=max_new_tokens,
        temperature=temperature, top_p=top_p, top_k=top_k,
        stop_token_ids=self.stop_ids, rng=seed)
    out = []
    for row, length in enumerate(batch.lengths):
      tokens = [int(t) for t in batch.tokens[row, :length]]
      out.append({
          'tokens': tokens,
          'text': tokenizer_lib.decode(self.tokenizer, tokens),
          'prompt_tokens': prompt_ids[batch.prompt_index[row]],
      })
    return out

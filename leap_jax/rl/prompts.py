"""Task + contract + history -> chat messages -> prompt token ids.

History truncation rule (documented, deterministic):
  1. Only the last `max_history_turns` attempts are shown; older ones are
     replaced by one line saying how many were omitted.
  2. Each shown answer is reduced to its code (the candidate the environment
     judged) and capped at `max_answer_chars` (head kept: the definitions).
  3. Each feedback is capped at `max_feedback_chars` (tail kept: errors end
     there).
  4. If the rendered prompt is still over `max_prompt_tokens`, the oldest
     shown attempts are dropped one at a time. If the latest alone is too
     long, its answer and feedback caps are halved (down to MIN_CAP_CHARS),
     and as a last resort it is omitted too. So a prompt never exceeds
     max_prompt_tokens unless the task text alone does (an error): the
     trainer must see the very context the sampler saw.
The chat template is the tokenizer's own when it has one; otherwise a plain
deterministic template (PLAIN_*).
"""

import dataclasses
from typing import Any, Callable, Sequence

import kernels_pallas
from leap_jax.env import allowlist, candidate

SYSTEM = ('You are an expert in JAX and Pallas. You write correct, fast GPU '
          'kernels with jax.experimental.pallas.')

CONTRACT = """\
Answer with one ```python block. The code must:
- define `kernel(*inputs)`: it takes the inputs in the order listed above and
  returns an array (or tuple) with the reference's structure, shapes and
  dtypes;
- do the computation inside `pl.pallas_call` kernels; outside them only data
  movement and cheap glue (reshape, transpose, pad, slice, concatenate, dtype
  casts, broadcasting) is allowed;
- import only: {modules}; {subsets};
- never pass `interpret=` (the environment chooses how kernels run).
Refused: files, the host, callbacks, jax.config and global state, private or
dunder attributes, exec/eval/open/getattr, assigning to attributes."""

BACKEND_RULES = {
    'triton': ('Backend: Pallas Triton (GPU). Block shapes must be powers of '
               'two; use pl.program_id for the grid position.'),
    'mosaic': ('Backend: Pallas Mosaic GPU. Use the mosaic_gpu pallas '
               'module; block shapes must be powers of two.'),
}

RETRY = ('Feedback from the environment on your previous answer:\n{feedback}'
         '\n\nFix the kernel and answer again with one ```python block.')
OMITTED = '({n} earlier attempt(s) omitted.)\n'

PLAIN_ROLE = '<|{role}|>\n'
PLAIN_END = '\n<|end|>\n'
PLAIN_GENERATION = '<|assistant|>\n'

TRUNCATED = '\n# ... [truncated]\n'
MIN_CAP_CHARS = 64  # answer/feedback caps are never halved below this


@dataclasses.dataclass(frozen=True)
class Attempt:
  """One earlier turn of a trajectory: the model's answer and its feedback."""
  answer: str
  feedback: str


def task_text(task_id: str, backend: str = 'triton') -> str:
  """The first user message: description, reference, shapes, contract."""
  task = kernels_pallas.get_task(task_id)
  shapes = '\n'.join(f'  input {i}: {s.dtype} {list(s.shape)}'
                     for i, s in enumerate(task.input_shapes()))
  modules = ', '.join(sorted(allowlist.ALLOWED_MODULES - {'__future__'}))
  subsets = '; '.join(f'from {m} only {", ".join(sorted(names))}'
                      for m, names in sorted(allowlist.MODULE_SUBSETS.items())
                      if m != '__future__')
  return (f'Task {task_id}.\n{task.description}\n\n'
          f'Reference implementation (plain jax.numpy):\n```python\n'
          f'{task.reference_source.rstrip()}\n```\n\nInputs:\n{shapes}\n\n'
          f'{CONTRACT.format(modules=modules, subsets=subsets)}\n'
          f'{BACKEND_RULES.get(backend, "")}').rstrip()


def _answer_code(answer: str, max_chars: int) -> str:
  code = candidate.extract_code(answer)
  text = answer.strip() if code is None else f'```python\n{code.strip()}\n```'
  if len(text) > max_chars:
    text = text[:max_chars] + TRUNCATED
  return text


def _feedback(feedback: str, max_chars: int) -> str:
  feedback = feedback.strip()
  return feedback if len(feedback) <= max_chars else (
      '...' + feedback[-max_chars:])


def messages(task_id: str, history: Sequence[Attempt], *,
             max_history_turns: int = 2, max_answer_chars: int = 6000,
             max_feedback_chars: int = 1500, backend: str = 'triton',
             task_text_fn: Callable[[str, str], str] = task_text
             ) -> list[dict[str, str]]:
  """System, task, then (assistant answer, user feedback) per kept attempt."""
  keep = list(history)[-max_history_turns:] if max_history_turns > 0 else []
  omitted = len(history) - len(keep)
  out = [{'role': 'system', 'content': SYSTEM},
         {'role': 'user', 'content': task_text_fn(task_id, backend)}]
  for i, attempt in enumerate(keep):
    out.append({'role': 'assistant',
                'content': _answer_code(attempt.answer, max_answer_chars)})
    note = OMITTED.format(n=omitted) if i == 0 and omitted else ''
    out.append({'role': 'user', 'content': note + RETRY.format(
        feedback=_feedback(attempt.feedback, max_feedback_chars))})
  return out


def has_chat_template(tokenizer: Any) -> bool:
  return bool(getattr(tokenizer, 'chat_template', None))


def render(msgs: Sequence[dict[str, str]], tokenizer: Any) -> list[int]:
  """Token ids of the messages plus the assistant generation prefix."""
  if has_chat_template(tokenizer):
    text = tokenizer.apply_chat_template(list(msgs), tokenize=False,
                                         add_generation_prompt=True)
    return list(tokenizer.encode(text, add_special_tokens=False))
  text = ''.join(PLAIN_ROLE.format(role=m['role']) + m['content'] + PLAIN_END
                 for m in msgs) + PLAIN_GENERATION
  return list(tokenizer.encode(text))


class PromptBuilder:
  """Renders prompts for a tokenizer under the truncation rule above."""

  def __init__(self, tokenizer: Any, max_history_turns: int = 2,
               max_answer_chars: int = 6000, max_feedback_chars: int = 1500,
               max_prompt_tokens: int = 3072, backend: str = 'triton',
               task_text_fn: Callable[[str, str], str] = task_text):
    self.tokenizer = tokenizer
    self.task_text_fn = task_text_fn  # (task_id, backend) -> first message
    self.max_history_turns = max_history_turns
    self.max_answer_chars = max_answer_chars
    self.max_feedback_chars = max_feedback_chars
    self.max_prompt_tokens = max_prompt_tokens
    self.backend = backend

  @classmethod
  def from_config(cls, tokenizer: Any, cfg, backend: str = 'triton',
                  **kw) -> 'PromptBuilder':
    return cls(tokenizer, cfg.max_history_turns, cfg.max_answer_chars,
               cfg.max_feedback_chars, cfg.max_prompt_tokens, backend, **kw)

  def messages(self, task_id: str, history: Sequence[Attempt],
               max_history_turns: int | None = None, shrink: int = 0
               ) -> list[dict[str, str]]:
    """shrink: how many times the answer/feedback caps are halved."""
    keep = self.max_history_turns if max_history_turns is None else (
        max_history_turns)
    cap = lambda chars: max(chars >> shrink, MIN_CAP_CHARS)
    return messages(task_id, history, max_history_turns=keep,
                    max_answer_chars=cap(self.max_answer_chars),
                    max_feedback_chars=cap(self.max_feedback_chars),
                    backend=self.backend, task_text_fn=self.task_text_fn)

  def encode(self, task_id: str, history: Sequence[Attempt] = ()) -> list[int]:
    """At most max_prompt_tokens ids (rule 4); ValueError if the task text
    alone is longer."""
    keep, shrink = min(self.max_history_turns, len(history)), 0
    while True:
      ids = render(self.messages(task_id, history, keep, shrink),
                   self.tokenizer)
      if len(ids) <= self.max_prompt_tokens:
        return ids
      if keep > 1:
        keep -= 1
      elif keep == 1 and (self.max_answer_chars >> shrink > MIN_CAP_CHARS or
                          self.max_feedback_chars >> shrink > MIN_CAP_CHARS):
        shrink += 1
      elif keep == 1:
        keep = 0
      else:
        raise ValueError(
            f'the prompt of {task_id} alone is {len(ids)} tokens, over '
            f'max_prompt_tokens={self.max_prompt_tokens}: raise it')

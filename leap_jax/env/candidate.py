"""Pulls the candidate's source out of a model answer.

One pass over the answer's lines (a regex over the whole answer backtracks
quadratically on unclosed fences); answers over `MAX_ANSWER_CHARS` are not
read at all (`oversize` says why, for the verdict).
"""

from __future__ import annotations

import ast
import re

MAX_ANSWER_CHARS = 1 << 17   # 128 Ki characters, ~30k tokens of code

# Matched against one line at a time, so each match is linear in that line.
_OPENER_RE = re.compile(r"[ \t]*```[ \t]*([\w+-]*).*")
_CLOSER_RE = re.compile(r"[ \t]*```[ \t]*")
_PYTHON_LANGS = ("", "python", "py", "python3")


def oversize(answer: str, max_chars: int = MAX_ANSWER_CHARS) -> str | None:
  """Why an answer is too long to read, or None."""
  if len(answer) <= max_chars:
    return None
  return (f"The answer has {len(answer)} characters, over the limit of "
          f"{max_chars}; nothing of it was read.")


def fence(source: str) -> str:
  """`source` as an answer: one ```python block (what extract_code reads)."""
  return f"```python\n{source.rstrip()}\n```"


def _fenced_blocks(answer: str) -> list[tuple[str, str]]:
  """(language, body) of every closed fence, in order.

  A fence opens on a line that starts with ``` (after blanks) and closes on
  the next line holding only ``` and blanks; lines split on "\\n" only. An
  unclosed fence yields nothing (nor does anything after it, since every
  later fence line would have closed it).
  """
  blocks = []
  lang, body_start = None, 0
  pos, n = 0, len(answer)
  while pos < n:
    end = answer.find("\n", pos)
    line_end = n if end < 0 else end
    line = answer[pos:line_end]
    if lang is None:
      opener = _OPENER_RE.fullmatch(line)
      if opener and end >= 0:  # an opener needs its newline
        lang, body_start = opener.group(1), end + 1
    elif _CLOSER_RE.fullmatch(line):
      blocks.append((lang, answer[body_start:pos]))
      lang = None
    if end < 0:
      break
    pos = end + 1
  return blocks


def extract_code(answer: str, max_chars: int = MAX_ANSWER_CHARS) -> str | None:
  """The answer's last ```python block, else the answer if it parses.

  Unlabelled fences count as python; other languages are ignored. None for
  answers over `max_chars` (unread).
  """
  if len(answer) > max_chars:
    return None
  blocks = [body for lang, body in _fenced_blocks(answer)
            if lang.lower() in _PYTHON_LANGS]
  if blocks:
    code = blocks[-1]
    return code if code.strip() else None
  if "```" in answer or not answer.strip():
    return None
  try:
    ast.parse(answer)
  except (SyntaxError, ValueError, RecursionError, MemoryError):
    return None
  return answer

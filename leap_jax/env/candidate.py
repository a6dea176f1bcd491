"""Pulls the candidate's source out of a model answer."""

from __future__ import annotations

import ast
import re

_FENCE_RE = re.compile(
    r"^[ \t]*```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
    re.DOTALL | re.MULTILINE)


def fence(source: str) -> str:
  """`source` as an answer: one ```python block (what extract_code reads)."""
  return f"```python\n{source.rstrip()}\n```"


def extract_code(answer: str) -> str | None:
  """The answer's last ```python block, else the answer if it parses.

  Unlabelled fences count as python; other languages are ignored.
  """
  blocks = [m.group("body") for m in _FENCE_RE.finditer(answer)
            if m.group("lang").lower() in ("", "python", "py", "python3")]
  if blocks:
    code = blocks[-1]
    return code if code.strip() else None
  if "```" in answer or not answer.strip():
    return None
  try:
    ast.parse(answer)
  except SyntaxError:
    return None
  return answer

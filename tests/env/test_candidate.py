import re

import hypothesis
import hypothesis.strategies as st

from leap_jax.env import candidate
from leap_jax.env.candidate import extract_code, fence, oversize

# The former implementation (quadratic on unclosed fences), kept as the
# reference for what a fence is.
_OLD_FENCE_RE = re.compile(
    r"^[ \t]*```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
    re.DOTALL | re.MULTILINE)


def _old_blocks(answer):
  return [(m.group("lang"), m.group("body"))
          for m in _OLD_FENCE_RE.finditer(answer)]


def test_last_python_block_wins():
  answer = "First\n```python\nx = 1\n```\nthen\n```python\ndef kernel(x):\n  return x\n```\n"
  assert extract_code(answer) == "def kernel(x):\n  return x\n"


def test_unlabelled_fence_counts_other_languages_do_not():
  assert extract_code("```\ny = 2\n```") == "y = 2\n"
  assert extract_code("```bash\nrm -rf /\n```") is None


def test_plain_python_answer_is_taken_whole():
  code = "import jax\n\ndef kernel(x):\n\n    return x\n"
  assert extract_code(code) == code


def test_prose_or_empty_is_no_code():
  assert extract_code("I cannot do this task.") is None
  assert extract_code("") is None
  assert extract_code("```python\n\n```") is None


def test_indentation_and_blank_lines_survive():
  body = "def kernel(x):\n\n    if x:\n        return x\n\n    return x\n"
  assert extract_code(f"Sure:\n```python\n{body}```\nDone.") == body


def test_fence_is_what_extract_code_reads():
  source = "def kernel(x):\n\n    return x\n"
  assert extract_code(fence(source)) == source


def test_unclosed_fence_yields_nothing_after_it():
  answer = "```python\nx = 1\n```\n```python\ny = 2\n"
  assert extract_code(answer) == "x = 1\n"
  assert extract_code("```python\ny = 2\n") is None


def test_hostile_unclosed_fences_near_the_cap_are_read_in_one_pass():
  # 143 KB of unclosed fences held the former regex for 197 s.
  answer = "```python\n" + "```x\n" * 20000
  assert len(answer) < candidate.MAX_ANSWER_CHARS
  assert extract_code(answer) is None          # no line closes the fence
  assert extract_code(answer + "```") == "```x\n" * 20000


def test_answers_over_the_cap_are_refused_unread():
  assert extract_code("x = 1" + " " * 96, max_chars=100) is None
  assert "101 characters, over the limit of 100" in oversize("x" * 101, 100)
  assert oversize("x" * 100, 100) is None
  assert extract_code("x = 1\n", max_chars=6) == "x = 1\n"


def test_deeply_nested_plain_answer_is_no_code_not_a_crash():
  assert extract_code("(" * 10000 + ")" * 10000) is None


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(st.lists(st.sampled_from(
    ["```", "```python", "``` py3 x", "````", " ```", "\t```\t", "``` bash",
     "x = 1", "", " ", "\r", "```\r", "py", "`"]), max_size=12),
    st.booleans())
def test_fences_match_the_former_regex(lines, trailing_newline):
  answer = "\n".join(lines) + ("\n" if trailing_newline else "")
  assert candidate._fenced_blocks(answer) == _old_blocks(answer)  # noqa: SLF001

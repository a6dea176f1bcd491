from leap_jax.env.candidate import extract_code, fence


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

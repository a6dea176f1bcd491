"""Prompt builder: task text, history, truncation rule, chat templates."""

import pytest

from leap_jax.rl import prompts
from tests.rl.conftest import ByteTokenizer, ChatTokenizer

TASK = 'level1/relu'
CODE = '```python\ndef kernel(x):\n  return x\n```'


def test_task_text_has_description_reference_shapes_contract():
  text = prompts.task_text(TASK)
  assert 'ReLU' in text and 'def reference(x)' in text
  assert 'float32 [1024, 1024]' in text
  assert '`kernel(*inputs)`' in text and 'interpret=' in text
  assert 'jax.experimental.pallas' in text


def test_messages_hold_history_in_order():
  history = [prompts.Attempt('Here:\n' + CODE, 'Status: wrong_output. A'),
             prompts.Attempt('no code at all', 'Status: no_code. B')]
  msgs = prompts.messages(TASK, history)
  assert [m['role'] for m in msgs] == ['system', 'user', 'assistant', 'user',
                                       'assistant', 'user']
  assert msgs[2]['content'] == CODE  # reduced to the judged code
  assert 'Status: wrong_output. A' in msgs[3]['content']
  assert msgs[4]['content'] == 'no code at all'
  assert 'Status: no_code. B' in msgs[5]['content']


def test_truncation_rule():
  history = [prompts.Attempt(f'attempt {i} ' + 'x' * 50, f'fb{i} ' + 'y' * 50)
             for i in range(4)]
  msgs = prompts.messages(TASK, history, max_history_turns=2,
                          max_answer_chars=20, max_feedback_chars=10)
  assert len(msgs) == 6  # the last two attempts only
  assert msgs[2]['content'].startswith('attempt 2')
  assert msgs[2]['content'].endswith(prompts.TRUNCATED)
  assert '(2 earlier attempt(s) omitted.)' in msgs[3]['content']
  assert '...' + 'y' * 10 in msgs[3]['content']  # tail of the feedback
  assert 'fb2' not in msgs[3]['content']


def test_builder_drops_oldest_attempts_to_fit():
  tok = ByteTokenizer()
  history = [prompts.Attempt(f'answer{i} ' + 'z' * 400, f'feedback{i}')
             for i in range(3)]
  full = prompts.PromptBuilder(tok, max_history_turns=3,
                               max_prompt_tokens=100_000)
  n_full = len(full.encode(TASK, history))
  tight = prompts.PromptBuilder(tok, max_history_turns=3,
                                max_prompt_tokens=n_full - 10)
  text = tok.decode(tight.encode(TASK, history))
  assert 'answer0' not in text and 'answer1' in text and 'answer2' in text
  one = prompts.PromptBuilder(tok, max_history_turns=3,
                              max_prompt_tokens=n_full - 800)
  text = tok.decode(one.encode(TASK, history))
  assert 'answer2' in text and 'feedback2' in text and 'answer1' not in text


def test_builder_shrinks_then_omits_the_latest_attempt_then_errors():
  tok = ByteTokenizer()
  history = [prompts.Attempt('answer2 ' + 'z' * 2000, 'y' * 2000 + ' fb2')]
  build = lambda n: prompts.PromptBuilder(tok, max_prompt_tokens=n)
  bare = len(build(10**6).encode(TASK))
  # Room for about 600 more bytes: the attempt stays with halved caps
  # (answer head and feedback tail kept).
  ids = build(bare + 600).encode(TASK, history)
  text = tok.decode(ids)
  assert len(ids) <= bare + 600
  assert 'answer2' in text and 'fb2' in text and prompts.TRUNCATED in text
  # Room for the task alone: the attempt is omitted, never cut mid-prompt.
  ids = build(bare + 60).encode(TASK, history)
  assert len(ids) <= bare + 60 and 'answer2' not in tok.decode(ids)
  with pytest.raises(ValueError, match='max_prompt_tokens=.*raise it'):
    build(bare - 1).encode(TASK, history)


def test_plain_and_chat_templates():
  msgs = prompts.messages(TASK, [])
  plain = ByteTokenizer().decode(prompts.render(msgs, ByteTokenizer()))
  assert plain.startswith('<|system|>\n' + prompts.SYSTEM)
  assert plain.endswith(prompts.PLAIN_GENERATION)
  chat = ChatTokenizer().decode(prompts.render(msgs, ChatTokenizer()))
  assert chat.startswith('[system]') and chat.endswith('[assistant]')
  # Deterministic.
  assert prompts.render(msgs, ByteTokenizer()) == prompts.render(
      msgs, ByteTokenizer())


def test_contract_states_the_allowlist():
  from leap_jax.env import allowlist
  text = prompts.task_text(TASK)
  for module in allowlist.ALLOWED_MODULES - {'__future__'}:
    assert module in text
  for module, names in allowlist.MODULE_SUBSETS.items():
    if module != '__future__':
      assert f'from {module} only {", ".join(sorted(names))}' in text
  assert 'jax.config' in text and 'exec/eval/open/getattr' in text

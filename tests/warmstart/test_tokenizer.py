import pytest
from hypothesis import given, settings, strategies as st

from leap_jax.model import tokenizer as tokenizer_lib
from leap_jax.warmstart import corpus
from leap_jax.warmstart import tokenizer as embedded


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp("tok")
  embedded.train(corpus.task_texts(corpus.training_tasks()), 512, out)
  return out


@pytest.fixture(scope="module")
def tok(tok_dir):
  return tokenizer_lib.load(tok_dir)  # the same loader real checkpoints use


def test_code_round_trips_exactly(tok):
  code = "def kernel(x):\n\n    if x:\n\t\treturn x  # é\n\n\n  return  x\n"
  assert tokenizer_lib.decode(tok, tok.encode(code)) == code


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_any_text_round_trips(tok, text):
  assert tokenizer_lib.decode(tok, tok.encode(text)) == text


def test_vocab_and_specials(tok):
  assert len(tok) == 512
  ids = embedded.stop_token_ids(tok)
  assert len(set(ids)) == 2 and all(i < 512 for i in ids)


def test_chat_template_marks_turns(tok):
  ids = tokenizer_lib.encode(tok, "write a kernel", chat=True)
  text = tok.decode(ids)
  assert text == ("<|im_start|>user\nwrite a kernel<|im_end|>\n"
                  "<|im_start|>assistant\n")


def test_corpus_holds_out_eval_split():
  ids = {t.task_id for t in corpus.training_tasks()}
  import kernels_pallas
  assert ids and not ids & set(kernels_pallas.task_ids("eval"))


def test_trained_on_code_compresses_it(tok):
  source = corpus.training_tasks()[0].solution_candidate_source
  assert len(tok.encode(source)) < len(source.encode()) / 2


@pytest.fixture(scope="module")
def line_tok(tmp_path_factory):
  import kernels_pallas
  tasks = [kernels_pallas.get_task(t)
           for t in kernels_pallas.resolve_tasks("gen:train:30")]
  return embedded.train(corpus.task_texts(tasks), 768,
                        tmp_path_factory.mktemp("lines"), split_lines=True)


def test_split_lines_never_merges_across_a_line_end(line_tok):
  import kernels_pallas
  task = kernels_pallas.get_task(kernels_pallas.resolve_tasks("gen:eval:1")[0])
  text = task.solution_candidate_source + task.reference_source
  pieces = [line_tok.decode([i]) for i in line_tok.encode(text)]
  assert "".join(pieces) == text
  assert all("\n" not in p[:-1] for p in pieces)


def test_split_lines_makes_a_step_one_token_in_reference_and_kernel(line_tok):
  import kernels_pallas
  task = kernels_pallas.get_task(kernels_pallas.resolve_tasks("gen:eval:1")[0])
  step = "  h = x\n"
  ids = line_tok.encode(step, add_special_tokens=False)
  assert [line_tok.decode([i]) for i in ids] == [step]
  ref_ids = line_tok.encode(task.reference_source, add_special_tokens=False)
  kernel_ids = line_tok.encode(task.solution_candidate_source,
                              add_special_tokens=False)
  shared = set(ref_ids) & set(kernel_ids)
  steps = [ln + "\n" for ln in task.reference_source.splitlines()[1:-1]]
  assert all(line_tok.encode(s, add_special_tokens=False)[0] in shared
             for s in steps)

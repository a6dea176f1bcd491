"""After seal(), no code compiled from the candidate's file runs unnoticed."""

import gc
import weakref

import pytest

from leap_jax.env import quarantine

# A tripwire raised in a finalizer or a weakref callback is "unraisable".
pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning")

FILENAME = "<test-quarantine>"

SOURCE = '''
LOG = []

def plain(x):
  return x + 1

def make_closure(k):
  def add_k(x):
    return x + k
  return add_k

class Thing:
  def method(self):
    return "ran"

class Phoenix(dict):
  def __del__(self):
    LOG.append("finalized")
    again = Phoenix()
    again["self"] = again   # re-armed: cyclic garbage once more

def arm():
  first = Phoenix()
  first["self"] = first

def held():
  try:
    yield 1
  finally:
    LOG.append("closed")

def on_death(ref):
  LOG.append("weakref callback")
'''


class _Recorder:
  def __init__(self):
    self.events = []

  def __call__(self, what: str) -> BaseException:
    self.events.append(what)
    return PermissionError(what)


@pytest.fixture
def sealed():
  """(candidate module namespace, recorder), sealed; gc restored after."""
  was_enabled = gc.isenabled()
  quarantine.mark()
  namespace = {"__name__": "candidate"}
  exec(compile(SOURCE, FILENAME, "exec"), namespace)  # noqa: S102
  closure = namespace["make_closure"](2)
  thing = namespace["Thing"]()
  generator = namespace["held"]()
  next(generator)
  namespace["arm"]()
  record = _Recorder()
  try:
    disarmed = quarantine.seal(FILENAME, record)
    yield namespace, record, closure, thing, disarmed
  finally:
    gc.unfreeze()
    if was_enabled:
      gc.enable()


def test_pending_finalizers_and_open_generators_run_at_seal(sealed):
  namespace, record, *_ = sealed
  log = namespace["LOG"]
  assert "finalized" in log and "closed" in log
  # The re-armed Phoenix is garbage again; its __del__ is a tripwire now.
  assert any("Phoenix.__del__" in e for e in record.events)
  assert not gc.isenabled()


@pytest.mark.parametrize("call", [
    lambda ns, closure, thing: ns["plain"](1),
    lambda ns, closure, thing: closure(1),
    lambda ns, closure, thing: thing.method(),
    lambda ns, closure, thing: ns["make_closure"](3),
])
def test_every_candidate_function_is_a_tripwire(sealed, call):
  namespace, record, closure, thing, *_ = sealed
  before = len(record.events)
  with pytest.raises(PermissionError, match="candidate code ran after tracing"):
    call(namespace, closure, thing)
  assert len(record.events) == before + 1


def test_a_weakref_callback_of_the_candidate_trips(sealed):
  namespace, record, *_ = sealed
  token = namespace["Thing"]()  # no candidate code: Thing has no __init__
  watch = weakref.ref(token, namespace["on_death"])
  before = len(record.events)
  del token  # the referent dies: its callback would run now
  assert watch() is None
  assert len(record.events) == before + 1 and "on_death" in record.events[-1]
  assert "weakref callback" not in namespace["LOG"]


def test_functions_from_other_files_are_untouched(sealed):
  def ours(x):
    return x * 2
  assert ours(2) == 4
  assert sealed[-1] >= 6  # plain, make_closure, add_k, method, __del__, ...


def test_a_generator_that_will_not_close_is_a_violation():
  was_enabled = gc.isenabled()
  quarantine.mark()
  namespace = {}
  exec(compile("def stubborn():\n  while True:\n    try:\n      yield\n"
               "    except BaseException:\n      pass\n", FILENAME, "exec"),
       namespace)  # noqa: S102
  generator = namespace["stubborn"]()
  next(generator)
  record = _Recorder()
  try:
    quarantine.seal(FILENAME, record)
  finally:
    gc.unfreeze()
    if was_enabled:
      gc.enable()
  assert any("would not close" in e for e in record.events)
  del generator

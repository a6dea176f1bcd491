"""Keeps a candidate's code from running once its program is traced.

After tracing, the worker compiles, runs and times the checked program, and
no Python of the candidate's may run then: not a finalizer (a self-re-arming
`__del__` on cyclic garbage), not a weakref callback, not a `__hash__` met
in a cache lookup, not a pytree flattener. So:

  mark()   before the candidate runs: the heap so far is frozen, and from
           then on gc.get_objects() lists only what was made since (the
           candidate's objects and what tracing made).
  seal()   after tracing: pending finalizers run now (the state check that
           follows sees what they did); every generator of candidate code
           is closed (its `finally` runs now, not when it is freed later);
           every function compiled from the candidate's source gets a
           tripwire for code, which records a sandbox violation when called;
           automatic garbage collection is switched off for the rest of the
           process (one candidate per process; `release()` for a worker
           recycled for trusted code).
"""

from __future__ import annotations

import functools
import gc
import types
import warnings
from collections.abc import Callable

_RECORD = "leap-tripwire-record"
_WHAT = "leap-tripwire-what"


@functools.cache
def _tripwire_template(free_vars: int) -> types.CodeType:
  """Code for a function with `free_vars` closure cells that raises
  _RECORD(_WHAT); both are string constants, replaced per function."""
  cells = [f"c{i}" for i in range(free_vars)]
  source = "def outer():\n"
  source += "".join(f"  {c} = None\n" for c in cells)
  source += "  def tripwire(*args, **kwargs):\n"
  if cells:
    source += f"    ({', '.join(cells)},)\n"
  source += f"    raise {_RECORD!r}({_WHAT!r})\n"
  source += "  return tripwire\n"
  namespace: dict = {}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", SyntaxWarning)  # "str is not callable"
    exec(compile(source, "<tripwire>", "exec"), namespace)  # noqa: S102
  return namespace["outer"]().__code__


def _tripwire_code(function: types.FunctionType,
                   record: Callable[[str], BaseException]) -> types.CodeType:
  """A tripwire for `function`: calls `record(what ran)` and raises what it
  returns. Both are the code's own constants, not globals: a function's
  globals are the candidate's module, which the candidate controls."""
  name = function.__qualname__
  name = name[:100] if type(name) is str else "?"  # noqa: E721  (no subclass code)
  what = f"candidate code ran after tracing ({name})"
  code = _tripwire_template(len(function.__code__.co_freevars))
  replace = {_RECORD: record, _WHAT: what}
  return code.replace(co_consts=tuple(
      replace.get(c, c) if isinstance(c, str) else c for c in code.co_consts))


def mark() -> None:
  """Freezes the heap: later gc.get_objects() calls see only new objects."""
  gc.freeze()


def release() -> None:
  """Automatic collection back on: for a worker recycled for trusted code."""
  gc.enable()


def _close(generator, record) -> None:
  try:
    if isinstance(generator, types.AsyncGeneratorType):
      generator.aclose().send(None)
    else:
      generator.close()
  except StopIteration:
    pass
  except BaseException:  # noqa: BLE001  (refused to close, or raised)
    record("a generator of the candidate's that would not close")


def seal(filename: str, record: Callable[[str], BaseException]) -> int:
  """Disarms every function and generator compiled from `filename`.

  `record(what)` notes a violation (and returns the exception to raise).
  Returns how many functions were disarmed.
  """
  gc.collect()  # finalizers of the candidate's garbage run now, still armed
  disarmed = 0
  for obj in gc.get_objects():
    if isinstance(obj, types.FunctionType):
      code = obj.__code__
      if code.co_filename == filename:
        obj.__code__ = _tripwire_code(obj, record)
        disarmed += 1
    elif isinstance(obj, types.GeneratorType | types.CoroutineType
                    | types.AsyncGeneratorType):
      code = getattr(obj, "gi_code", None) or getattr(
          obj, "cr_code", None) or getattr(obj, "ag_code", None)
      if code is not None and code.co_filename == filename:
        _close(obj, record)
  gc.collect()  # what closing freed
  gc.disable()
  return disarmed

"""What a candidate gets when it imports an allowed module, inside the worker.

A module with a name subset (allowlist.MODULE_SUBSETS) is handed out as a
view holding only those names; asking it for any other name is a recorded
violation that names the member. Two members are replaced by checked
versions, because applied to anything but the candidate's own definition
they set attributes on it:
  functools.wraps       only on a function the candidate defined, with the
                        default attribute lists;
  dataclasses.dataclass only on a plain class the candidate defined (base
                        object, no metaclass), flags True/False, fields with
                        identifier names, class attributes of inert types
                        (numbers, strings, tuples of them, dtypes, functions,
                        properties, Field objects with inert defaults), so no
                        candidate code runs while dataclasses processes it.
Code generation inside the standard library is the one exec/compile the
sandbox lets through while candidate code is on the stack
(`codegen_exemption`):
  collections.namedtuple (typing.NamedTuple) checks that every field name is
    an identifier without a leading underscore and evaluates its fixed
    template with empty builtins;
  typing.ForwardRef (string annotations) only compiles: running the code
    would need get_type_hints or eval, which stay refused;
  dataclasses._create_fn evaluates its templates, filled with field names;
    only when called from dataclasses' own code under the checked decorator
    above, so the names are identifiers and no candidate code ran in between.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import keyword
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from leap_jax.env import allowlist

CANDIDATE_MODULE = "candidate"        # the candidate module's __name__
CANDIDATE_FILENAME = "<candidate>"    # its code objects' co_filename
_DATACLASS, _UPDATE_WRAPPER = dataclasses.dataclass, functools.update_wrapper

Record = Callable[[str], BaseException]   # records a violation, returns it

_INERT_TYPES = (int, float, bool, complex, str, bytes, type(None))
_METHOD_TYPES = (types.FunctionType, staticmethod, classmethod, property,
                 types.GetSetDescriptorType, types.MemberDescriptorType)
_FACTORY_TYPES = (types.FunctionType, type, types.BuiltinFunctionType)
_FIELD_FLAGS = ("init", "repr", "hash", "compare", "kw_only")
_DTYPE_NAMES = ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "float16", "float32", "float64")
_SCALAR_TYPES = tuple({getattr(m, n) for m in (np, jnp) for n in _DTYPE_NAMES}
                      | {jnp.bfloat16})


# Every check below compares by identity (`is`): `==`, `in` or isinstance on
# a candidate object could call the candidate's own methods.
def _one_of(value: Any, options: tuple[Any, ...]) -> bool:
  return any(value is option for option in options)


def _inert(value: Any, depth: int = 0) -> bool:
  kind = type(value)
  if _one_of(kind, _INERT_TYPES) or value is dataclasses.MISSING:
    return True
  if kind is tuple:
    return depth < 4 and all(_inert(v, depth + 1) for v in value)
  return issubclass(kind, np.dtype) or _one_of(value, _SCALAR_TYPES)


def _inert_field(field: dataclasses.Field) -> bool:
  flags_ok = all(_one_of(type(getattr(field, f)), (bool, type(None)))
                 or getattr(field, f) is dataclasses.MISSING
                 for f in _FIELD_FLAGS)
  return flags_ok and _inert(field.default) and (
      field.default_factory is dataclasses.MISSING
      or _one_of(type(field.default_factory), _FACTORY_TYPES))


def _dataclass_refusal(cls: Any) -> str | None:
  """Why `cls` may not go through dataclasses (None: it may)."""
  bases = cls.__bases__ if type(cls) is type else ()
  if len(bases) != 1 or bases[0] is not object:
    return "only a plain class of your own (no base class, no metaclass)"
  namespace = vars(cls)
  module = namespace.get("__module__")
  if type(module) is not str or module != CANDIDATE_MODULE:
    return "only a class defined in your code"
  annotations = namespace.get("__annotations__", {})
  if type(annotations) is not dict or not all(
      type(k) is str and k.isidentifier() and not keyword.iskeyword(k)
      and not k.startswith("__") for k in annotations):
    return "field names must be identifiers"
  for name, value in namespace.items():
    if name == "__annotations__" or _inert(value) or _one_of(
        type(value), _METHOD_TYPES):
      continue
    if type(value) is dataclasses.Field and _inert_field(value):
      continue
    return (f"class attribute {name!r} is a {type(value).__name__}; "
            f"defaults must be numbers, strings, tuples or dtypes")
  return None


def _dataclass_wrap(cls: Any, flags: dict[str, bool], record: Record):
  """The checked decorator's body (codegen_exemption knows its code)."""
  reason = _dataclass_refusal(cls)
  if reason:
    raise record(f"dataclasses.dataclass on {getattr(cls, '__name__', cls)!r}"
                 f": {reason}")
  return _DATACLASS(cls, **flags)


def _checked_dataclass(record: Record):
  def dataclass(cls=None, /, **flags):
    bad = sorted(k for k, v in flags.items() if type(v) is not bool)
    if bad:
      raise record(f"dataclasses.dataclass flags must be True/False: {bad}")
    wrap = functools.partial(_dataclass_wrap, flags=flags, record=record)
    return wrap if cls is None else wrap(cls)
  return dataclass


def _checked_wraps(record: Record):
  def wraps(wrapped, *rest, **kwargs):
    if rest or kwargs:
      raise record("functools.wraps with assigned=/updated=")

    def decorate(wrapper):
      if type(wrapper) is not types.FunctionType or (
          wrapper.__code__.co_filename != CANDIDATE_FILENAME):
        raise record("functools.wraps(...) applied to something other than "
                     "a function you defined")
      return _UPDATE_WRAPPER(wrapper, wrapped)
    return decorate
  return wraps


_CHECKED = {("functools", "wraps"): _checked_wraps,
            ("dataclasses", "dataclass"): _checked_dataclass}


def _refuse_member(name: str, record: Record):
  subset = ", ".join(sorted(allowlist.MODULE_SUBSETS[name]))

  def __getattr__(member: str):
    raise record(f"{name}.{member} (allowed from {name}: {subset})")
  return __getattr__


def view(name: str, record: Record) -> types.ModuleType:
  """The module the candidate gets for `import name` (already imported)."""
  module = sys.modules[name]
  subset = allowlist.MODULE_SUBSETS.get(name)
  if subset is None:
    return module
  out = types.ModuleType(name, module.__doc__)
  for member in subset:
    checked = _CHECKED.get((name, member))
    setattr(out, member, checked(record) if checked else getattr(module,
                                                                 member))
  out.__getattr__ = _refuse_member(name, record)
  return out


def codegen_exemption() -> Callable[[str, types.FrameType], bool]:
  """(event, frame that asked) -> whether a compile/exec is the standard
  library's own code generation described above. Bound now: replacing the
  functions later does not change which code objects are trusted."""
  namedtuple = collections.namedtuple.__code__
  forward_ref = typing.ForwardRef.__init__.__code__
  create_fn = dataclasses._create_fn.__code__  # noqa: SLF001
  dataclasses_file = create_fn.co_filename
  checked_wrap = _dataclass_wrap.__code__

  def allowed(event: str, frame: types.FrameType) -> bool:
    code = frame.f_code
    if code is namedtuple:
      return True
    if code is forward_ref:
      return event == "compile"
    if code is not create_fn:
      return False
    caller = frame.f_back
    while caller is not None and (
        caller.f_code.co_filename == dataclasses_file):
      caller = caller.f_back
    return caller is not None and caller.f_code is checked_wrap
  return allowed

"""The interpreter state a candidate must leave exactly as the harness set it.

What the worker verifies and times is the compiled program of the checked
jaxpr, so everything that shapes how a jaxpr is lowered, compiled, run or
read back must be the harness's own: jax's config (thread-local overrides
included, so a suspended generator holding `jax.disable_jit()` shows), every
primitive's fields (`def_impl`, `def_abstract_eval`), every rule registry
(mlir lowerings per platform, discharge rules, Pallas' Triton / Mosaic rules),
class attributes (`Compiled.__call__`) and every module global.

None of those is named here. The fingerprint covers the globals of every
loaded module and, below the globals of jax, jaxlib, numpy, ml_dtypes,
builtins and the harness, the containers, primitives, classes and plain
objects they hold, to a small depth. It records object identities only
(never `==`, which could run candidate code).

What may change: caches grow, so plain dicts, lists, sets, instance
attributes and module globals may gain entries (never lose or rebind one).
Registries may not change at all: a dict keyed by primitives, a primitive's
own fields and a class's attributes are compared whole, so a rule added for
a primitive that had none (a new platform-specific lowering) shows too.
"""

from __future__ import annotations

import itertools
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from jax._src import config as jax_config
from jax.extend import core as jex_core

# Packages followed below their globals: what traces, lowers, compiles, runs
# and reads back a program. (The rest of the standard library holds caches,
# sys.modules and linecache among them, that change on their own.)
DEEP_PREFIXES = ("jax", "jaxlib", "numpy", "ml_dtypes", "builtins",
                 "leap_jax.env")
# Generated MLIR op builders (thousands of classes): they only spell IR, and
# a candidate function patched into them would trip the quarantine anyway.
_GENERATED = "_ops_gen"
# Modules whose globals may not even grow: the harness itself.
STRICT_PREFIXES = ("leap_jax.env",)
# Levels followed below a module global: mlir's {platform: {primitive: rule}}
# needs two.
DEPTH = 3
_SKIPPED_MODULES = frozenset({"__main__", "__mp_main__"})
# Globals the interpreter itself rebinds (the last uncaught exception, which
# pytest also sets after each failed test): not a candidate's change.
_BOOKKEEPING = {"sys": frozenset({"last_type", "last_value", "last_traceback",
                                  "last_exc"})}
_chain = itertools.chain.from_iterable

# How an object's contents are fingerprinted.
_SKIP, _DICT, _LIST, _SET, _FIXED, _ATTRS, _STRICT_ATTRS = range(7)


def _defining_module(cls: type) -> str | None:
  name = cls.__dict__.get("__module__")
  return name if isinstance(name, str) else None


class _Kinds:
  """Per-type decision of how to fingerprint an object, cached by type."""

  def __init__(self, deep: frozenset[str]):
    self.deep = deep
    self._by_type: dict[type, int] = {}

  def of(self, obj: Any) -> int:
    if isinstance(obj, type):  # a class: its own module decides
      return _STRICT_ATTRS if _defining_module(obj) in self.deep else _SKIP
    cls = type(obj)
    kind = self._by_type.get(cls)
    if kind is None:
      kind = self._by_type[cls] = self._kind_of_type(cls)
    return kind

  def _kind_of_type(self, cls: type) -> int:
    if issubclass(cls, types.ModuleType):
      return _SKIP
    if issubclass(cls, dict):
      return _DICT
    if issubclass(cls, list):
      return _LIST
    if issubclass(cls, set):
      return _SET
    if issubclass(cls, tuple | frozenset):
      return _FIXED
    if issubclass(cls, jex_core.Primitive):
      return _STRICT_ATTRS
    if _defining_module(cls) in self.deep and "__dict__" in dir(cls):
      return _ATTRS
    return _SKIP


def _is_registry(d: dict) -> bool:
  return any(isinstance(k, jex_core.Primitive) for k in d)


def _may_grow(obj: Any, kind: int) -> bool:
  if kind == _DICT:
    return not _is_registry(obj)
  return kind in (_LIST, _ATTRS)


def _children(obj: Any, kind: int) -> list[tuple[Any, tuple[str, Any]]]:
  if kind == _DICT:
    out = [(v, ("item", k)) for k, v in obj.items()]
    return out + [(k, ("key", k)) for k in obj
                  if isinstance(k, jex_core.Primitive)]
  if kind in (_LIST, _FIXED):
    return [(v, ("item", i)) for i, v in enumerate(obj)]
  if kind == _SET:
    return []
  return [(v, ("attr", k)) for k, v in vars(obj).items()]


def _format_label(label) -> str:
  steps = []
  while not isinstance(label, str):
    label, (how, key) = label
    steps.append(f".{key}" if how == "attr" else f"[{str(key)[:60]}]")
  return label + "".join(reversed(steps))


def _walk(modules: dict[str, types.ModuleType], deep: frozenset[str]):
  """[(object, kind, label)] for every object followed below the globals of
  the `deep` modules; each object once."""
  kinds = _Kinds(deep)
  found, seen = [], set()
  level = [(v, (name, ("attr", attr))) for name in sorted(deep)
           for attr, v in vars(modules[name]).items()]
  for depth in range(DEPTH):
    following = []
    for obj, label in level:
      kind = kinds.of(obj)
      if kind == _SKIP or id(obj) in seen:
        continue
      seen.add(id(obj))
      try:
        if kind != _FIXED:  # tuples cannot change; what they hold can
          found.append((obj, kind, label))
        if depth + 1 < DEPTH:
          following += [(c, (label, step)) for c, step in _children(obj, kind)]
      except Exception:  # noqa: BLE001  (an object whose vars() fails)
        continue
    level = following
  return found


Check = Callable[[], "str | None"]


def fingerprint() -> tuple[Check, Callable[[], None]]:
  """(changed, rebase) over the state as it is now.

  changed() names what was changed since (a dotted name), or None; what
  grew until then becomes the reference (so it may not shrink back later).
  rebase() accepts the present state: what the harness itself changed since
  the fingerprint (the sandbox's thread stubs); modules imported since are
  watched from then on at the level of their globals.

  Taking it costs about a second (a worker takes it while warming up);
  changed() and rebase() cost a few tens of milliseconds. Both are closures
  over everything they use, bound now, and hold what they saw (so no id is
  reused and every comparison is by identity): a candidate that rebinds a
  builtin, this module or a class cannot change how they check, and one
  that cannot reach the closures (frames and the gc are closed to it)
  cannot change what they compare against.
  """
  # Bound now: nothing below looks a global or builtin up later.
  is_, chain, list_, len_, vars_, all_, map_, zip_, next_, isinstance_ = (
      operator.is_, _chain, list, len, vars, all, map, zip, next, isinstance)
  range_, min_, exception, module_type = (
      range, min, Exception, types.ModuleType)
  sys_modules, skipped, strict = sys.modules, _SKIPPED_MODULES, STRICT_PREFIXES
  holders = jax_config.config._value_holders  # noqa: SLF001
  dict_, list_kind, set_kind = _DICT, _LIST, _SET
  format_label, bookkeeping = _format_label, _BOOKKEEPING

  def globals_of(name, module):
    items = vars_(module).items()
    ignored = bookkeeping.get(name)
    if ignored:
      items = [(k, v) for k, v in items if k not in ignored]
    return list_(chain(items))

  def config_values():
    return [h.value for h in list_(holders.values())]

  def contents(obj, kind):
    if kind == dict_:
      return list_(chain(obj.items()))
    if kind == list_kind or kind == set_kind:
      return list_(obj)
    return list_(chain(vars_(obj).items()))

  def same(was, now, may_grow):
    if len_(now) != len_(was) and not (may_grow and len_(now) > len_(was)):
      return False
    return all_(map_(is_, was, now))

  def first_changed_key(was, now):
    for i in range_(0, min_(len_(was), len_(now)), 2):
      if was[i] is not now[i] or was[i + 1] is not now[i + 1]:
        return was[i]
    longer = now if len_(now) > len_(was) else was  # an entry added or gone
    return longer[min_(len_(was), len_(now))]

  modules = {name: m for name, m in list_(sys_modules.items())
             if isinstance_(m, module_type) and name not in skipped}
  state = {
      "config": config_values(),
      "globals": {name: globals_of(name, m)
                  for name, m in modules.items()},
  }
  deep = frozenset(n for n in modules if n.startswith(DEEP_PREFIXES)
                   and _GENERATED not in n)
  objects = [[obj, kind, contents(obj, kind), _may_grow(obj, kind), label]
             for obj, kind, label in _walk(modules, deep)]

  def compare(rebase):
    now = config_values()
    if not same(state["config"], now, False):
      if not rebase:
        names = list_(holders)
        return "jax.config." + next_(
            (n for n, a, b in zip_(names, state["config"], now) if a is not b),
            "(a flag)")
      state["config"] = now
    for name, was in list_(state["globals"].items()):
      module = modules[name]
      if sys_modules.get(name) is not module:
        if rebase:
          continue
        return f"sys.modules[{name!r}]"
      items = globals_of(name, module)
      if not same(was, items, not name.startswith(strict)):
        if not rebase:
          return f"{name}.{first_changed_key(was, items)}"
      if len_(items) != len_(was) or rebase:
        state["globals"][name] = items
    for entry in objects:
      obj, kind, was, may_grow, label = entry
      try:
        items = contents(obj, kind)
      except exception:  # noqa: BLE001
        items = None
      if items is None or not same(was, items, may_grow):
        if not rebase:
          try:
            return format_label(label)
          except exception:  # noqa: BLE001  (a builtin rebound by then)
            return "an object of jax's"
      if items is not None and (rebase or len_(items) != len_(was)):
        entry[2] = items  # a ratchet: what grew may not shrink back later
    return None

  def changed():
    return compare(False)

  def rebase():
    compare(True)
    for name in list_(modules):  # gone or replaced: watched anew below
      if sys_modules.get(name) is not modules[name]:
        del modules[name]
        state["globals"].pop(name, None)
    for name, module in list_(sys_modules.items()):
      if name not in modules and isinstance_(module, module_type) and (
          name not in skipped):
        modules[name] = module
        state["globals"][name] = globals_of(name, module)

  return changed, rebase

"""Static screen of a candidate's source: parse, allowlisted imports, no escapes.

The first line of defence; the sandbox (sandbox.py) enforces the same rules at
run time, so a bypass here still ends as `forbidden`, not as a side effect.
Names are judged by what they resolve to: every `module.attr` chain rooted at
an import is resolved here, in the trusted process, and refused by the
identity of the object it reaches (allowlist.forbidden_object); an attribute
of anything else is refused by its spelling (allowlist.FORBIDDEN_ATTRIBUTES).
A builtin's name is refused only where Python's scoping makes it the builtin
(scopes.py), so an argument called `input` passes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import re
import string
import types
from typing import Any

from leap_jax.env import allowlist
from leap_jax.env import scopes
from leap_jax.env.verdict import Status

ENTRY_POINT = "kernel"

# Re-exported: the tables live in allowlist.py.
ALLOWED_MODULES = allowlist.ALLOWED_MODULES
FORBIDDEN_NAMES = allowlist.FORBIDDEN_NAMES
FORBIDDEN_ATTRIBUTES = allowlist.FORBIDDEN_ATTRIBUTES
MODULE_NAME_ALLOWLIST = allowlist.MODULE_SUBSETS

# Frame, generator, coroutine, traceback and code objects lead back into
# the harness (f_back, f_globals, f_locals): refused however they are reached.
_INTROSPECTION_ATTRIBUTE = re.compile(r"^(gi|cr|ag|f|tb|co)_")

_DUNDER = re.compile(r"__\w+__")


@dataclasses.dataclass(frozen=True)
class ScreenResult:
  status: Status | None   # None: passed the screen
  detail: str = ""


class _Refusal(Exception):
  def __init__(self, node: ast.AST | int | None, reason: str):
    super().__init__(reason)
    self.line = node if isinstance(node, int) else getattr(node, "lineno", 0)
    self.reason = reason


def _is_main_test(test: ast.AST) -> bool:
  return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
          and test.left.id == "__name__" and len(test.ops) == 1
          and isinstance(test.ops[0], ast.Eq)
          and isinstance(test.comparators[0], ast.Constant)
          and test.comparators[0].value == "__main__")


def _main_guard(tree: ast.Module) -> set[int]:
  """ids of the `__name__` and "__main__" nodes of top-level
  `if __name__ == "__main__":` tests."""
  return {id(n) for stmt in tree.body
          if isinstance(stmt, ast.If) and _is_main_test(stmt.test)
          for n in (stmt.test.left, stmt.test.comparators[0])}


def _without_main_blocks(source: str, tree: ast.Module) -> str:
  """`source` with the body of each top-level `if __name__ == "__main__":`
  replaced by `pass` (line numbers kept). The body is a self-test that never
  runs: the worker's module is named `candidate`, and the screen refuses
  every other use of `__name__`, so nothing can make the test true. Its
  `else:` branch does run and stays."""
  lines = source.splitlines(keepends=True)
  for stmt in tree.body:
    if not (isinstance(stmt, ast.If) and _is_main_test(stmt.test)):
      continue
    first, last = stmt.body[0], stmt.body[-1]
    if first.lineno == stmt.lineno:  # one-line form: screened as it is
      continue
    indent = lines[first.lineno - 1][:first.col_offset]
    for i in range(first.lineno - 1, last.end_lineno):
      lines[i] = "\n"
    lines[first.lineno - 1] = indent + "pass\n"
  return "".join(lines)


def _attribute(value: types.ModuleType, name: str) -> Any:
  """getattr, importing an allowed submodule not yet imported first."""
  if not hasattr(value, name) and allowlist.module_allowed(
      f"{value.__name__}.{name}"):
    importlib.import_module(f"{value.__name__}.{name}")
  return getattr(value, name)


def _member(module: str, name: str, node: ast.AST) -> Any:
  """`module.name` for `from module import name`, judged by identity."""
  if not allowlist.member_allowed(module, name):
    raise _Refusal(node, f"from {module} import {name} is not allowed"
                   + _subset_hint(module))
  try:
    value = _attribute(importlib.import_module(module), name)
  except (ImportError, AttributeError):
    raise _Refusal(node, f"{module}.{name} is not an allowed module or a "
                   f"member of {module}") from None
  reason = allowlist.forbidden_object(value)
  if reason:
    raise _Refusal(node, f"from {module} import {name}: {module}.{name} "
                   f"{reason}")
  return value


def _subset_hint(module: str) -> str:
  subset = allowlist.MODULE_SUBSETS.get(module)
  return (f" (from {module} only: {', '.join(sorted(subset))})"
          if subset else "")


def _bindings(tree: ast.AST, refusals: list[_Refusal]) -> dict[str, Any]:
  """Names bound by imports, and the objects they are bound to."""
  bound = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if not allowlist.module_allowed(alias.name):
          refusals.append(_Refusal(
              node, f"import of {alias.name!r} is not allowed"))
          continue
        root = alias.asname or alias.name.split(".")[0]
        bound[root] = importlib.import_module(
            alias.name if alias.asname else root)
    elif isinstance(node, ast.ImportFrom):
      module = "." * node.level + (node.module or "")
      if node.level or not allowlist.module_allowed(module):
        refusals.append(_Refusal(node, f"import of {module!r} is not allowed"))
        continue
      for alias in node.names:
        if alias.name == "*":
          refusals.append(_Refusal(node, "star imports are not allowed"))
          continue
        try:
          bound[alias.asname or alias.name] = _member(module, alias.name, node)
        except _Refusal as r:
          refusals.append(r)
  return bound


@dataclasses.dataclass
class _Context:
  tree: ast.Module
  parents: dict[int, ast.AST]
  resolved: set[int]          # Attribute nodes judged by identity
  main_guard: set[int]

  def parent(self, node: ast.AST) -> ast.AST | None:
    return self.parents.get(id(node))


def _decorator_use(ctx: _Context, node: ast.AST, kind: str) -> bool:
  """Whether `node` decorates the candidate's own def (kind "def": as
  `@f(...)`) or class (kind "class": `@f` or `@f(constant flags)`)."""
  parent = ctx.parent(node)
  target = node
  if isinstance(parent, ast.Call) and parent.func is node:
    if kind == "class" and (parent.args or not all(
        isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool)
        for k in parent.keywords)):
      return False
    if kind == "def" and (len(parent.args) != 1 or parent.keywords):
      return False  # assigned=/updated= name the attributes it copies
    target, parent = parent, ctx.parent(parent)
  elif kind == "def":
    return False
  owner = (ast.FunctionDef, ast.AsyncFunctionDef) if kind == "def" else (
      ast.ClassDef,)
  return isinstance(parent, owner) and any(
      d is target for d in parent.decorator_list)


@dataclasses.dataclass(frozen=True)
class _DecoratorOnly:
  value: Any
  path: str
  kind: str


@functools.cache
def _decorator_only() -> tuple[_DecoratorOnly, ...]:
  out = []
  for path, kind in allowlist.DECORATOR_ONLY.items():
    module, _, name = path.rpartition(".")
    out.append(_DecoratorOnly(getattr(importlib.import_module(module), name),
                              path, kind))
  return tuple(out)


def _check_decorator_only(ctx: _Context, node: ast.AST, value: Any,
                          chain: str) -> None:
  if not isinstance(getattr(node, "ctx", None), ast.Load):
    return
  for rule in _decorator_only():
    if value is rule.value and not _decorator_use(ctx, node, rule.kind):
      how = ("`@...(wrapped)` (one argument) on your own def"
             if rule.kind == "def" else
             "a decorator of your own class (flags as True/False constants)")
      raise _Refusal(node, f"{chain} ({rule.path}) may only be used as {how}")


def _check_chain(ctx: _Context, name: ast.Name, value: Any) -> None:
  """Follows `name.a.b...` through modules, judging each step's object."""
  node, chain = name, name.id
  parent = ctx.parent(node)
  while (isinstance(value, types.ModuleType)
         and isinstance(parent, ast.Attribute) and parent.value is node):
    if not allowlist.member_allowed(value.__name__, parent.attr):
      raise _Refusal(parent, f"{chain}.{parent.attr} is not allowed"
                     + _subset_hint(value.__name__))
    try:
      value = _attribute(value, parent.attr)
    except Exception:  # noqa: BLE001  (fails in the worker as well)
      return           # the rest of the chain is judged by spelling
    node, chain = parent, f"{chain}.{parent.attr}"
    ctx.resolved.add(id(node))
    reason = allowlist.forbidden_object(value)
    if reason:
      raise _Refusal(node, f"{chain} {reason}")
    parent = ctx.parent(node)
  if isinstance(value, types.ModuleType) and isinstance(
      node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute)
                                   and parent.value is node):
    raise _Refusal(node, f"module {chain!r} may only be used as "
                   f"{chain}.name")
  _check_decorator_only(ctx, node, value, chain)


def _check_imported_names(ctx: _Context, bound: dict[str, Any],
                          refusals: list[_Refusal]) -> None:
  for node in ast.walk(ctx.tree):
    if isinstance(node, ast.Name) and node.id in bound:
      try:
        _check_chain(ctx, node, bound[node.id])
      except _Refusal as r:
        refusals.append(r)


def _plain_format_fields(template: str) -> bool:
  """No replacement field (nested specs included) reads an attribute or an
  item: str.format resolves "{0.__globals__[os]}" by itself, past every
  check on attribute names."""
  try:
    fields = list(string.Formatter().parse(template))
  except ValueError:  # str.format refuses it too
    return True
  return all((name is None or not any(c in name for c in ".["))
             and (not spec or _plain_format_fields(spec))
             for _, name, spec, _ in fields)


def _format_violation(node: ast.Attribute) -> str | None:
  if node.attr not in ("format", "format_map"):
    return None
  receiver = node.value
  if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
    return f".{node.attr} only on a string literal (an f-string is simpler)"
  if not _plain_format_fields(receiver.value):
    return "format fields may not read attributes or items ({0.x}, {0[k]})"
  return None


def _node_violation(ctx: _Context, node: ast.AST) -> str | None:
  """Rules on single nodes (after the chains have been resolved)."""
  if isinstance(node, ast.Attribute):
    reason = _format_violation(node)
    if reason:
      return reason
  if isinstance(node, ast.Name) and node.id.startswith("__") and (
      id(node) not in ctx.main_guard):
    return f"use of {node.id!r} is not allowed"
  if isinstance(node, ast.Attribute):
    if node.attr.startswith("_") or _INTROSPECTION_ATTRIBUTE.match(node.attr):
      return f"attribute {node.attr!r} is not allowed"
    if id(node) not in ctx.resolved and node.attr in FORBIDDEN_ATTRIBUTES:
      return (f"attribute {node.attr!r} is not allowed here (only as a "
              f"member of an allowed module that is not file, host or "
              f"global-state access, e.g. plgpu.load)")
  if (isinstance(node, ast.Constant) and isinstance(node.value, str)
      and _DUNDER.fullmatch(node.value) and id(node) not in ctx.main_guard):
    return f"the string {node.value!r} is not allowed"
  if isinstance(node, ast.keyword) and node.arg == "interpret":
    return "do not pass interpret=: the environment chooses the backend"
  if isinstance(node, (ast.Global, ast.Nonlocal)):
    return "global/nonlocal state is not allowed"
  if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
    targets = (node.targets if isinstance(node, ast.Assign | ast.Delete)
               else [node.target])
    if any(isinstance(t, ast.Attribute) for t in targets):
      return "assigning to attributes is not allowed (no monkey-patching)"
  if isinstance(node, ast.ImportFrom):
    for alias in node.names:
      if alias.name.startswith("_"):
        return f"import of {alias.name!r} is not allowed"
  return None


def _check(source: str, tree: ast.Module) -> None:
  parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
  ctx = _Context(tree, parents, set(), _main_guard(tree))
  refusals: list[_Refusal] = []
  _check_imported_names(ctx, _bindings(tree, refusals), refusals)
  for node in ast.walk(tree):
    reason = _node_violation(ctx, node)
    if reason:
      refusals.append(_Refusal(node, reason))
  plain = frozenset(n for n in FORBIDDEN_NAMES if not n.startswith("__"))
  for use in scopes.builtin_uses(source, tree, plain):
    where = "at module level" if use.scope == "module" else (
        f"in {use.scope}, not as its argument or local")
    refusals.append(_Refusal(use.line, f"use of the builtin {use.name!r} "
                             f"({where}) is not allowed"))
  if refusals:
    raise min(refusals, key=lambda r: r.line)


def screen_source(source: str) -> ScreenResult:
  """Parses `source` and checks it against the allowlist."""
  try:
    tree = ast.parse(source)
  except SyntaxError as e:
    return ScreenResult(Status.SYNTAX_ERROR,
                        f"SyntaxError: {e.msg} (line {e.lineno})")
  except (ValueError, RecursionError, MemoryError) as e:
    return ScreenResult(Status.SYNTAX_ERROR, f"{type(e).__name__}: {e}")
  try:
    screened = _without_main_blocks(source, tree)
    _check(screened, ast.parse(screened) if screened != source else tree)
  except _Refusal as r:
    return ScreenResult(Status.FORBIDDEN, f"Line {r.line or '?'}: {r.reason}.")
  except (RecursionError, MemoryError, SyntaxError) as e:
    return ScreenResult(Status.SYNTAX_ERROR, f"{type(e).__name__}: {e}")
  defines_entry = any(
      isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT
      or isinstance(node, ast.Assign) and any(
          isinstance(t, ast.Name) and t.id == ENTRY_POINT for t in node.targets)
      for node in tree.body)
  if not defines_entry:
    return ScreenResult(Status.MISSING_ENTRY_POINT,
                        f"Define `def {ENTRY_POINT}(*inputs)` at module level.")
  return ScreenResult(None)

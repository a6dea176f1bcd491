"""Static screen of a candidate's source: parse, allowlisted imports, no escapes.

The first line of defence; the sandbox (sandbox.py) enforces the same rules at
run time, so a bypass here still ends as `forbidden`, not as a side effect.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import string
import types

from leap_jax.env.verdict import Status

ENTRY_POINT = "kernel"

ALLOWED_MODULES = frozenset({
    "jax", "jax.numpy", "jax.lax", "jax.nn", "jax.experimental",
    "jax.experimental.pallas", "jax.experimental.pallas.triton",
    "jax.experimental.pallas.mosaic_gpu", "functools", "math", "typing",
})

# Builtins a kernel has no business calling.
FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals",
    "vars", "getattr", "setattr", "delattr", "breakpoint", "input", "help",
    "memoryview", "exit", "quit", "__builtins__", "__loader__", "__spec__",
    "object", "type", "super",
})

# Attributes that reach the host, the file system, other processes or the
# harness; also everything dunder or private.
FORBIDDEN_ATTRIBUTES = frozenset({
    "pure_callback", "io_callback", "callback", "debug", "config",
    "load", "save", "savez", "loadtxt", "savetxt", "fromfile", "tofile",
    "genfromtxt", "memmap", "device_get", "os", "sys", "subprocess",
    "builtins", "ctypes", "importlib", "socket", "shutil", "pathlib",
    "threading", "multiprocessing", "signal", "time", "gc", "inspect",
    "system", "popen", "fork", "environ", "exit", "interpreters",
    "experimental_io", "host_callback", "ensure_compile_time_eval",
    # Builtins reached as attributes of a module that holds `builtins`.
    "eval", "exec", "open", "getattr", "setattr", "delattr", "vars",
    "globals", "locals", "breakpoint", "input", "memoryview",
    # Generic setattr / eval in allowed modules; native file and net access.
    "update_wrapper", "wraps", "get_type_hints", "profiler", "distributed",
    "monitoring", "modules", "mro",
})

# Frame, generator, coroutine, traceback and code objects lead back into
# the harness (f_back, f_globals, f_locals).
_INTROSPECTION_ATTRIBUTE = re.compile(r"^(gi|cr|ag|f|tb|co)_")

# Public names a candidate may take from these modules; their other members
# reach eval or setattr (typing.get_type_hints, functools.update_wrapper) or
# other modules (typing.stdlib_re -> re -> enum -> builtins).
MODULE_NAME_ALLOWLIST = {
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache"}),
    "typing": frozenset({
        "Any", "Callable", "Optional", "Sequence", "Tuple", "Union", "List",
        "Dict", "Iterable", "Mapping"}),
}

# Public jax modules a candidate may not hold even though they are jax.*.
_FORBIDDEN_JAX_MODULES = (
    "jax.profiler", "jax.distributed", "jax.debug", "jax.monitoring",
    "jax.experimental.compilation_cache", "jax.experimental.multihost_utils",
    "jax.experimental.serialize_executable", "jax.experimental.mosaic",
    "jax.tools", "jax.extend",
)


@dataclasses.dataclass(frozen=True)
class ScreenResult:
  status: Status | None   # None: passed the screen
  detail: str = ""


def _import_names(node: ast.AST) -> list[str]:
  if isinstance(node, ast.Import):
    return [alias.name for alias in node.names]
  if isinstance(node, ast.ImportFrom):
    if node.level:
      return ["." * node.level + (node.module or "")]
    base = node.module or ""
    # `from jax.experimental import pallas` names the module jax.experimental.pallas
    names = [base]
    names += [f"{base}.{a.name}" for a in node.names
              if f"{base}.{a.name}" in ALLOWED_MODULES]
    return names
  return []


def _module_allowed(name: str) -> bool:
  if name in ALLOWED_MODULES:
    return True
  parts = name.split(".")
  return (parts[0] == "jax" and not any(p.startswith("_") for p in parts)
          and not any(name == m or name.startswith(m + ".")
                      for m in _FORBIDDEN_JAX_MODULES))


def _bound_modules(tree: ast.AST) -> dict[str, types.ModuleType]:
  """Names the candidate binds to allowlisted modules by importing them."""
  bound = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name not in ALLOWED_MODULES:
          continue
        root = alias.asname or alias.name.split(".")[0]
        bound[root] = importlib.import_module(
            alias.name if alias.asname else root)
    elif isinstance(node, ast.ImportFrom) and not node.level and (
        node.module in ALLOWED_MODULES):
      for alias in node.names:
        full = f"{node.module}.{alias.name}"
        if full in ALLOWED_MODULES:
          bound[alias.asname or alias.name] = importlib.import_module(full)
  return bound


def _attribute(value, name: str):
  """getattr, importing a not yet imported public jax submodule first."""
  if isinstance(value, types.ModuleType) and not hasattr(value, name):
    full = f"{value.__name__}.{name}"
    if _module_allowed(full):
      importlib.import_module(full)
  return getattr(value, name)


def _module_use_violation(tree: ast.AST) -> str | None:
  """Modules only as `module.attr` chains that stay inside the allowlist.

  Every chain rooted at an imported module is resolved here, in the trusted
  process, so an alias like typing.stdlib_re.enum.bltns (builtins) or
  jax.experimental.shard_map.jshmap.np (numpy) is caught whatever it is
  called. A module passed around as a value could escape that check, so
  that is rejected too.
  """
  bound = _bound_modules(tree)
  parents = {}
  for node in ast.walk(tree):
    for child in ast.iter_child_nodes(node):
      parents[child] = node
  for node in ast.walk(tree):
    if not (isinstance(node, ast.Name) and node.id in bound):
      continue
    parent = parents.get(node)
    if not (isinstance(parent, ast.Attribute) and parent.value is node):
      if isinstance(node.ctx, ast.Load):
        return f"module {node.id!r} may only be used as {node.id}.name"
      continue
    value, chain = bound[node.id], node.id
    while isinstance(parent, ast.Attribute):
      names = (MODULE_NAME_ALLOWLIST.get(value.__name__)
               if isinstance(value, types.ModuleType) else None)
      if names is not None and parent.attr not in names:
        return f"{chain}.{parent.attr} is not allowed"
      try:
        value = _attribute(value, parent.attr)
      except Exception:  # noqa: BLE001  (fails in the worker as well)
        break
      chain += "." + parent.attr
      if isinstance(value, types.ModuleType) and not _module_allowed(
          value.__name__):
        return f"{chain} is the module {value.__name__!r}, not allowed"
      if isinstance(value, types.BuiltinFunctionType) and (
          value.__name__ in FORBIDDEN_NAMES):
        return f"{chain} is the builtin {value.__name__!r}"
      parent = parents.get(parent)
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and not node.level and (
        node.module in MODULE_NAME_ALLOWLIST):
      for alias in node.names:
        if alias.name not in MODULE_NAME_ALLOWLIST[node.module]:
          return f"from {node.module} import {alias.name} is not allowed"
  return None


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


def _violation(node: ast.AST) -> str | None:
  if isinstance(node, ast.Attribute):
    reason = _format_violation(node)
    if reason:
      return reason
  for name in _import_names(node):
    if name not in ALLOWED_MODULES:
      return f"import of {name!r} is not allowed"
  if isinstance(node, ast.Name) and (
      node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
    return f"use of {node.id!r} is not allowed"
  if isinstance(node, ast.Attribute) and (
      node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith("_")
      or _INTROSPECTION_ATTRIBUTE.match(node.attr)):
    return f"attribute {node.attr!r} is not allowed"
  if (isinstance(node, ast.Constant) and isinstance(node.value, str)
      and re.fullmatch(r"__\w+__", node.value)):
    return f"the string {node.value!r} is not allowed"
  if isinstance(node, ast.keyword) and node.arg == "interpret":
    return "do not pass interpret=: the environment chooses the backend"
  if isinstance(node, (ast.Global, ast.Nonlocal)):
    return "global/nonlocal state is not allowed"
  if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
    targets = (node.targets if isinstance(node, ast.Assign | ast.Delete)
               else [node.target])
    for target in targets:
      if isinstance(target, ast.Attribute):
        return "assigning to attributes is not allowed (no monkey-patching)"
  if isinstance(node, ast.ImportFrom):
    for alias in node.names:
      if alias.name == "*":
        return "star imports are not allowed"
      if alias.name in FORBIDDEN_ATTRIBUTES or alias.name.startswith("_"):
        return f"import of {alias.name!r} is not allowed"
  return None


def screen_source(source: str) -> ScreenResult:
  """Parses `source` and checks it against the allowlist."""
  try:
    tree = ast.parse(source)
  except SyntaxError as e:
    return ScreenResult(Status.SYNTAX_ERROR,
                        f"SyntaxError: {e.msg} (line {e.lineno})")
  except (ValueError, RecursionError, MemoryError) as e:
    return ScreenResult(Status.SYNTAX_ERROR, f"{type(e).__name__}: {e}")
  for node in ast.walk(tree):
    reason = _violation(node)
    if reason:
      line = getattr(node, "lineno", "?")
      return ScreenResult(Status.FORBIDDEN, f"Line {line}: {reason}.")
  reason = _module_use_violation(tree)
  if reason:
    return ScreenResult(Status.FORBIDDEN, f"{reason}.")
  defines_entry = any(
      isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT
      or isinstance(node, ast.Assign) and any(
          isinstance(t, ast.Name) and t.id == ENTRY_POINT for t in node.targets)
      for node in tree.body)
  if not defines_entry:
    return ScreenResult(Status.MISSING_ENTRY_POINT,
                        f"Define `def {ENTRY_POINT}(*inputs)` at module level.")
  return ScreenResult(None)

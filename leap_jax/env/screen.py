"""Static screen of a candidate's source: parse, allowlisted imports, no escapes.

The first line of defence; the sandbox (sandbox.py) enforces the same rules at
run time, so a bypass here still ends as `forbidden`, not as a side effect.
"""

from __future__ import annotations

import ast
import dataclasses

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
})


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


def _violation(node: ast.AST) -> str | None:
  for name in _import_names(node):
    if name not in ALLOWED_MODULES:
      return f"import of {name!r} is not allowed"
  if isinstance(node, ast.Name) and (
      node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
    return f"use of {node.id!r} is not allowed"
  if isinstance(node, ast.Attribute) and (
      node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith("_")):
    return f"attribute {node.attr!r} is not allowed"
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
  defines_entry = any(
      isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT
      or isinstance(node, ast.Assign) and any(
          isinstance(t, ast.Name) and t.id == ENTRY_POINT for t in node.targets)
      for node in tree.body)
  if not defines_entry:
    return ScreenResult(Status.MISSING_ENTRY_POINT,
                        f"Define `def {ENTRY_POINT}(*inputs)` at module level.")
  return ScreenResult(None)

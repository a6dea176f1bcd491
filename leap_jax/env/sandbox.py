"""Run-time confinement of the worker process that executes one candidate.

Applied after the harness has imported and warmed up everything it needs, and
before the candidate's code runs. Every layer is irrevocable for the process:
rlimits, stdio to /dev/null, an audit hook and restricted builtins (the OS
layer under them, namespaces, mounts and the uid, is jail.py). A blocked
action is recorded where the candidate cannot reach it, so catching the
exception does not hide it.
"""

from __future__ import annotations

import builtins
import dataclasses
import linecache
import os
import resource
import sys
from collections.abc import Iterable
from typing import Any

from leap_jax.env import allowlist
from leap_jax.env import module_views

# Audit events that a kernel never needs (prefix match).
_BLOCKED_EVENT_PREFIXES = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn",
    "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.putenv",
    "os.unsetenv", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
    "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate",
    "os.utime", "os.chdir", "os.listdir", "os.scandir", "os.listxattr",
    "os.setxattr", "os.removexattr", "shutil.", "ctypes.", "glob.",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "pty.",
    "urllib.", "http.", "ftplib.", "smtplib.", "webbrowser.", "mmap.",
    "_posixsubprocess.", "resource.setrlimit", "signal.", "sqlite3.",
)

_SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod",
    "enumerate", "filter", "float", "frozenset", "hash", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "ord",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice",
    "sorted", "str", "sum", "tuple", "zip", "bytes", "complex", "format",
    "hex", "bin", "oct", "id", "classmethod", "staticmethod", "property",
    "__build_class__", "__name__", "None", "True", "False", "Ellipsis",
    "NotImplemented", "ArithmeticError", "AssertionError", "AttributeError",
    "Exception", "IndexError", "KeyError", "LookupError", "NotImplementedError",
    "OverflowError", "RuntimeError", "StopIteration", "TypeError",
    "ValueError", "ZeroDivisionError",
})


@dataclasses.dataclass(frozen=True)
class Limits:
  memory_bytes: int
  cpu_seconds: int
  file_bytes: int = 1 << 20
  open_files: int = 256
  # Threads or processes a worker may start once confined (XLA starts a few
  # while compiling); fork and exec are refused by the audit hook anyway.
  new_tasks: int = 64


class _Violations:
  """Blocked actions; the candidate holds no reference to the instance.

  Each entry says what was refused and at which line of the candidate's code
  (the innermost candidate frame on the stack), so the next turn can fix it.
  """

  def __init__(self, filename: str = module_views.CANDIDATE_FILENAME):
    self._events: list[str] = []
    self._filename = filename
    self._getframe, self._getline = sys._getframe, linecache.getline

  def _candidate_line(self) -> int:
    frame = self._getframe(2)
    while frame is not None:
      if frame.f_code.co_filename == self._filename:
        return frame.f_lineno or 0
      frame = frame.f_back
    return 0

  def record(self, what: str, line: int | None = None) -> PermissionError:
    """`line`: the candidate's line, when the caller knows it already."""
    line = self._candidate_line() if line is None else line
    if line:
      source = self._getline(self._filename, line).strip()
      what += f" at line {line}" + (f": {source}" if source else "")
    self._events.append(what)
    return PermissionError(f"refused by the sandbox: {what}")

  def first(self) -> str | None:
    return self._events[0] if self._events else None

  def candidate_line(self) -> int:
    """The candidate's innermost line on the stack (0: none)."""
    return self._candidate_line()


VIOLATIONS = _Violations()

# What a blocked audit event means at the candidate's level (feedback).
_EVENT_MEANING = (
    ("open", "opening"), ("socket.", "network access"),
    ("subprocess.", "starting a process"), ("os.system", "starting a process"),
    ("os.exec", "starting a process"), ("os.posix_spawn", "starting a process"),
    ("os.spawn", "starting a process"), ("_posixsubprocess.", "starting a process"),
    ("os.fork", "forking"), ("os.kill", "sending a signal"),
    ("signal.", "signal handling"), ("ctypes.", "native code through ctypes"),
    ("compile", "running generated code (exec/eval/compile, or importing a "
                "module that was not loaded before the sandbox)"),
    ("exec", "running generated code (exec/eval/compile, or importing a "
             "module that was not loaded before the sandbox)"),
    ("_thread.", "starting a thread"),
    ("object.__getattr__", "introspection of frames or code"),
    ("sys._getframe", "frame access"), ("os.", "file system changes"),
)


def _describe(event: str, detail: str) -> str:
  """What a blocked audit event was, for the feedback."""
  meaning = next((m for prefix, m in _EVENT_MEANING
                  if event.startswith(prefix)), event)
  return f"{meaning} {detail}".strip() + f" [{event}]"


def apply_limits(limits: Limits, threads_now: int | None = None) -> None:
  """The rlimits; RLIMIT_NPROC (threads_now + new_tasks) only when the
  worker runs under a uid of its own (threads_now given): it counts all of
  a uid's tasks, and root ignores it."""
  soft_hard = lambda v: (v, v)  # noqa: E731
  resource.setrlimit(resource.RLIMIT_AS, soft_hard(limits.memory_bytes))
  # SIGXCPU at the soft limit (the worker dies as a crash); SIGKILL at the
  # hard one would look like a kill from outside, which the pool retries.
  resource.setrlimit(resource.RLIMIT_CPU,
                     (limits.cpu_seconds, limits.cpu_seconds + 1))
  resource.setrlimit(resource.RLIMIT_FSIZE, soft_hard(limits.file_bytes))
  resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
  _, nofile_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  nofile = min(limits.open_files, nofile_hard) if nofile_hard > 0 else limits.open_files
  resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
  if threads_now is not None:
    resource.setrlimit(resource.RLIMIT_NPROC,
                       soft_hard(threads_now + limits.new_tasks))


def silence_stdio() -> None:
  """Candidate output goes nowhere; results travel on a private pipe."""
  sys.stdout.flush()
  sys.stderr.flush()
  devnull = os.open(os.devnull, os.O_RDWR)
  for fd in (0, 1, 2):
    os.dup2(devnull, fd)
  os.close(devnull)


def _under(path: str, roots: Iterable[str]) -> bool:
  return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def install_audit_hook(scratch_dir: str, read_roots: Iterable[str],
                       candidate_filename: str) -> None:
  """Blocks escapes; reads only below `read_roots`, writes only in scratch.

  Everything the hook uses is bound here, so a candidate that rewrites this
  module's globals later cannot disarm it. Frame and code introspection,
  compile/exec and new threads are refused when candidate code asks for
  them (directly, or anywhere up the stack for compile/exec/threads).
  """
  scratch = os.path.realpath(scratch_dir)
  roots = tuple(os.path.realpath(r) for r in read_roots)
  blocked = tuple(_BLOCKED_EVENT_PREFIXES)
  record, realpath, fsdecode, under = (
      VIOLATIONS.record, os.path.realpath, os.fsdecode, _under)
  getframe = sys._getframe
  write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT
  busy = [False]
  from_stack = frozenset({"compile", "exec", "_thread.start_new_thread"})
  exempt, describe = module_views.codegen_exemption(), _describe
  # The gc lists every object (the harness's pipe, its fingerprint of jax's
  # state) and refers from any object to its holders.
  introspection = frozenset({"object.__getattr__", "sys._getframe",
                             "gc.get_objects", "gc.get_referrers",
                             "gc.get_referents"})

  def candidate_line(depth: int, event: str | None = None) -> int:
    """The candidate's line asking for this (0: not the candidate's doing,
    or the standard library's own code generation, see module_views)."""
    if busy[0]:  # events raised while we look at frames
      return 0
    busy[0] = True
    try:
      frame = getframe(2)
      if event is not None and exempt(event, frame):
        return 0
      while frame is not None and depth > 0:
        if frame.f_code.co_filename == candidate_filename:
          return frame.f_lineno or 1
        frame, depth = frame.f_back, depth - 1
      return 0
    finally:
      busy[0] = False

  def refuse(event: str, detail: str, line: int) -> PermissionError:
    return record(describe(event, detail), line)

  def hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
      path, mode = args[0], args[1]
      if not isinstance(path, str | bytes):
        raise refuse(event, "a file descriptor", candidate_line(200))
      path = realpath(fsdecode(path))
      writes = isinstance(mode, str) and any(c in mode for c in "wax+")
      if isinstance(mode, int):
        writes = bool(mode & write_flags)
      if under(path, (scratch,)) or (not writes and under(path, roots)):
        return
      raise refuse(event, f"{path!r} for {'writing' if writes else 'reading'}",
                   candidate_line(200))
    if event.startswith(blocked):
      raise refuse(event, "", candidate_line(200))
    if event in introspection:
      line = candidate_line(1)
      if line:
        raise refuse(event, repr(args[1]) if len(args) > 1 else "", line)
    if event in from_stack:
      line = candidate_line(200, event)
      if line:
        raise refuse(event, "", line)

  sys.addaudithook(hook)


class _NothingMoreToImport:
  """The only finder once confined. With candidate code anywhere on the
  stack (its import, or a library it called importing lazily) a violation;
  otherwise the harness's own import of a module the warm-up missed, which
  fails as ModuleNotFoundError (libraries' optional-import fallbacks keep
  working; a lazy import on the harness's path shows in the verdict)."""

  def __init__(self, violations: _Violations):
    self._record, self._line = violations.record, violations.candidate_line

  def find_spec(self, name, path=None, target=None):
    what = f"import {name!r} (not loaded before the sandbox)"
    line = self._line()
    if line:
      raise self._record(what, line)
    raise ModuleNotFoundError(f"No module named {name!r} (not loaded before "
                              "the sandbox)", name=name)


def seal_imports() -> None:
  """No module found from here on, whoever asks. An import would search and
  read the file system as the worker's uid, which may not even read a Python
  installed under a private home: so the warm-up loads every module, and a
  lazy import it missed fails the same way on every install."""
  sys.meta_path[:] = [_NothingMoreToImport(VIOLATIONS)]
  sys.path_importer_cache.clear()


def block_threads() -> None:
  """No new Python threads (Python 3.11 has no audit event for them)."""
  import _thread
  import threading
  stub = _denied("starting a thread")
  _thread.start_new_thread = stub
  _thread.start_new = stub
  threading._start_new_thread = stub  # noqa: SLF001


def _denied(name: str):
  def stub(*args, **kwargs):
    raise VIOLATIONS.record(f"{name}()")
  return stub


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
  """The candidate's __import__: allowed modules only, all imported before
  confinement (so no module code runs here); subset modules as views."""
  if level != 0 or not isinstance(name, str) or not allowlist.module_allowed(
      name):
    raise VIOLATIONS.record(f"import {name!r} (allowed: "
                            f"{', '.join(sorted(allowlist.ALLOWED_MODULES))})")
  module = sys.modules.get(name)
  if module is None:  # allowlist.import_all ran in warm-up; never here
    raise VIOLATIONS.record(f"import {name!r} (not loaded before the sandbox)")
  for attr in fromlist or ():
    _check_from(name, module, attr)
  if fromlist:
    return module_views.view(name, VIOLATIONS.record)
  root = name.partition(".")[0]
  return module_views.view(root, VIOLATIONS.record)


def _check_from(name: str, module, attr) -> None:
  """`from name import attr`: judged by what the member resolves to."""
  if not isinstance(attr, str) or attr == "*" or not allowlist.member_allowed(
      name, attr):
    raise VIOLATIONS.record(f"from {name} import {attr}")
  full = f"{name}.{attr}"
  if not hasattr(module, attr):
    if full in sys.modules or not allowlist.module_allowed(full):
      raise VIOLATIONS.record(f"from {name} import {attr} (not an allowed "
                              f"module or member)")
    raise VIOLATIONS.record(f"import {full!r} (not loaded before the sandbox)")
  reason = allowlist.forbidden_object(getattr(module, attr))
  if reason:
    raise VIOLATIONS.record(f"from {name} import {attr}: {full} {reason}")


def restricted_builtins() -> dict[str, Any]:
  """Builtins for the candidate's module: the harmless ones plus stubs."""
  table = {k: v for k, v in vars(builtins).items() if k in _SAFE_BUILTINS}
  for name in allowlist.FORBIDDEN_NAMES:
    if name not in table:
      table[name] = _denied(name)
  table["__import__"] = _guarded_import
  return table


def read_roots() -> list[str]:
  """Where the worker may read: Python, site-packages and the harness's own
  source (jax formats errors with source lines); never the tasks."""
  roots = {sys.prefix, sys.base_prefix, sys.exec_prefix,
           os.path.dirname(os.path.abspath(__file__))}
  roots |= {p for p in sys.path if "site-packages" in p or "dist-packages" in p}
  return sorted(roots)

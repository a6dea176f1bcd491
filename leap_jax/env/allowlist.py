"""What a candidate may import and use: the one source of truth.

The screen (screen.py, in the trusted parent) and the guarded import
(sandbox.py, in the worker) both read these tables, and the prompt
(rl/prompts.py) shows them. A module attribute is judged by the object it
resolves to (`forbidden_object`), so `plgpu.load` (a Pallas masked load) is
fine while `jnp.load` (file I/O) is not; names are refused by spelling only
where the object cannot be known before the code runs (FORBIDDEN_ATTRIBUTES).
"""

from __future__ import annotations

import builtins
import functools
import importlib
import types
from typing import Any

# Every module a candidate may import or reach through an attribute chain.
# All of them are imported before confinement (`import_all`), so importing
# one never runs module code inside the sandbox.
ALLOWED_MODULES = frozenset({
    "jax", "jax.numpy", "jax.lax", "jax.nn", "jax.random", "jax.tree",
    "jax.tree_util", "jax.dtypes", "jax.typing", "jax.scipy",
    "jax.scipy.special", "jax.experimental", "jax.experimental.pallas",
    "jax.experimental.pallas.triton", "jax.experimental.pallas.mosaic_gpu",
    "functools", "math", "typing", "numpy", "dataclasses", "__future__",
})

# Modules of which only these public names may be used. Their other members
# reach eval or setattr (typing.get_type_hints, functools.update_wrapper),
# other modules (typing.stdlib_re -> re -> enum -> builtins), files
# (numpy.save, numpy.memmap) or process-wide state (numpy.seterr,
# numpy.random.seed, numpy.set_printoptions).
MODULE_SUBSETS: dict[str, frozenset[str]] = {
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache",
                            "wraps"}),
    "typing": frozenset({
        "Any", "Callable", "ClassVar", "Dict", "Final", "Iterable",
        "Iterator", "List", "Literal", "Mapping", "NamedTuple", "Optional",
        "Sequence", "Tuple", "Type", "TypeVar", "Union"}),
    # Static shape arithmetic and constants: at trace time numpy only ever
    # sees shapes and Python numbers, never an input's values.
    "numpy": frozenset({
        "dtype", "finfo", "iinfo", "issubdtype", "promote_types",
        "result_type", "float16", "float32", "float64", "int8", "int16",
        "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_",
        "floating", "integer", "pi", "e", "inf", "nan", "newaxis", "prod",
        "ceil", "floor", "sqrt", "log", "log2", "exp", "maximum", "minimum",
        "gcd", "lcm", "ndim", "shape", "size"}),
    "dataclasses": frozenset({"dataclass", "field", "fields", "replace"}),
    "__future__": frozenset({"annotations"}),
}

# Members that may only decorate the candidate's own definition: applied to
# anything else they set attributes on it (a harness function, a jax class).
DECORATOR_ONLY = {"functools.wraps": "def", "dataclasses.dataclass": "class"}

# Builtins a kernel has no business calling (the sandbox replaces them with
# stubs; the screen refuses them where they resolve to the builtin).
FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals",
    "vars", "getattr", "setattr", "delattr", "breakpoint", "input", "help",
    "memoryview", "exit", "quit", "__builtins__", "__loader__", "__spec__",
    "object", "type", "super",
})

# Attributes refused by spelling wherever the screen cannot resolve the
# object they are taken from (a local, a call's result, a class or an
# instance): that value's type is only known at run time, and these names
# lead to files (ndarray.tofile/dump), native code (Lowered.compile with
# compiler options), primitive implementations (Primitive.def_impl),
# modules held by objects, or the builtins.
FORBIDDEN_ATTRIBUTES = frozenset({
    "pure_callback", "io_callback", "callback", "debug", "config",
    "load", "save", "savez", "loadtxt", "savetxt", "fromfile", "tofile",
    "dump", "genfromtxt", "memmap", "device_get", "os", "sys", "subprocess",
    "builtins", "ctypes", "importlib", "socket", "shutil", "pathlib",
    "threading", "multiprocessing", "signal", "time", "gc", "inspect",
    "system", "popen", "fork", "environ", "exit", "interpreters",
    "experimental_io", "host_callback", "ensure_compile_time_eval",
    "eval", "exec", "open", "getattr", "setattr", "delattr", "vars",
    "globals", "locals", "breakpoint", "input", "memoryview",
    "update_wrapper", "wraps", "get_type_hints", "profiler", "distributed",
    "monitoring", "modules", "mro", "compile", "def_impl",
    "def_abstract_eval", "def_effectful_abstract_eval", "def_custom_bind",
})

# Members of allowed modules that reach the host, files or jax's global
# state (resolved once; a name missing in this jax version is skipped).
_FORBIDDEN_MEMBERS = (
    "jax.device_get", "jax.live_arrays", "jax.clear_caches",
    "jax.disable_jit", "jax.effects_barrier", "jax.make_array_from_callback",
    "jax.copy_to_host_async", "jax.print_environment_info",
    "jax.ensure_compile_time_eval", "jax.set_mesh", "jax.numpy.load",
    "jax.numpy.fromfile", "numpy.save", "numpy.savez",
    "numpy.savez_compressed", "numpy.load", "numpy.loadtxt", "numpy.savetxt",
    "numpy.genfromtxt", "numpy.fromfile", "numpy.fromregex", "numpy.memmap",
    "jax.experimental.pallas.lower_as_mlir",
    "jax.experimental.pallas.pallas_export_experimental",
)

# Everything defined in these modules is refused: host callbacks, debugging
# callbacks, the profiler and jax's configuration (flags and their context
# managers, e.g. jax.debug_nans, jax.default_device, pl.enable_debug_checks).
_FORBIDDEN_DEFINING_MODULES = (
    "jax._src.config", "jax._src.callback", "jax._src.debugging",
    "jax._src.profiler", "numpy.lib._npyio_impl", "numpy.lib.npyio",
)


def import_all() -> None:
  """Imports every allowed module (before the sandbox is armed)."""
  for name in sorted(ALLOWED_MODULES):
    importlib.import_module(name)


def module_allowed(name: str) -> bool:
  return name in ALLOWED_MODULES


def member_allowed(module_name: str, member: str) -> bool:
  """Whether `module.member` passes the module's name subset (if any)."""
  subset = MODULE_SUBSETS.get(module_name)
  return (subset is None or member in subset) and not member.startswith("_")


def _resolve(path: str) -> Any:
  module_name, _, member = path.rpartition(".")
  return getattr(importlib.import_module(module_name), member)


@functools.cache
def _forbidden_ids() -> dict[int, tuple[Any, str]]:
  table = {}
  for path in _FORBIDDEN_MEMBERS:
    try:
      value = _resolve(path)
    except (ImportError, AttributeError):
      continue
    table[id(value)] = (value, path)
  for name in FORBIDDEN_NAMES:
    if hasattr(builtins, name):
      value = getattr(builtins, name)
      table[id(value)] = (value, f"the builtin {name}")
  return table


def forbidden_object(value: Any) -> str | None:
  """Why `value` (an object reached from an allowed module) is refused."""
  if isinstance(value, functools.partial):
    return forbidden_object(value.func)
  hit = _forbidden_ids().get(id(value))
  if hit is not None and hit[0] is value:
    return f"is {hit[1]}"
  if isinstance(value, types.ModuleType):
    if not module_allowed(value.__name__):
      return f"is the module {value.__name__!r}, not allowed"
    return None
  own = getattr(value, "__module__", None)
  for module in {own if isinstance(own, str) else "", type(value).__module__}:
    if any(module == m or module.startswith(m + ".")
           for m in _FORBIDDEN_DEFINING_MODULES):
      return f"is defined in {module} (host callbacks, files or jax's state)"
  return None

"""Sandbox layers in-process (builtins, import guard) and in a child (hook, limits)."""

import subprocess
import sys
import textwrap

import pytest

from leap_jax.env import sandbox


def test_restricted_builtins_have_no_escape_hatches():
  table = sandbox.restricted_builtins()
  for name in ("open", "exec", "eval", "compile", "getattr", "globals", "vars"):
    with pytest.raises(PermissionError):
      table[name]("x")
  assert table["len"]([1, 2]) == 2 and table["range"] is range


@pytest.mark.parametrize("name,fromlist", [
    ("os", ()), ("kernels_pallas", ()), ("leap_jax", ()), ("numpy.linalg", ()),
    ("jax", ("config",)), ("jax", ("_src",)), ("jax.experimental", ("*",)),
    ("numpy", ("save",)), ("functools", ("update_wrapper",)),
    ("typing", ("get_type_hints",)), ("jax.numpy", ("load",)),
    ("jax.experimental.pallas", ("tpu",)), ("jax", ("disable_jit",)),
])
def test_guarded_import_blocks(name, fromlist):
  with pytest.raises(PermissionError):
    sandbox._guarded_import(name, fromlist=fromlist)


def test_guarded_import_names_the_refused_member():
  with pytest.raises(PermissionError, match="numpy import save"):
    sandbox._guarded_import("numpy", fromlist=("save",))
  with pytest.raises(PermissionError, match="jax.numpy.load"):
    sandbox._guarded_import("jax.numpy", fromlist=("load",))


def test_guarded_import_allows_the_kernel_modules():
  module = sandbox._guarded_import("jax.experimental.pallas", fromlist=("BlockSpec",))
  assert hasattr(module, "BlockSpec")
  import jax
  from jax.experimental.pallas import triton
  assert sandbox._guarded_import(
      "jax.experimental.pallas", fromlist=("triton",)).triton is triton
  assert sandbox._guarded_import(
      "jax.experimental.pallas.triton", fromlist=("load",)).load is triton.load
  assert sandbox._guarded_import("jax.numpy") is jax  # `import jax.numpy`


def test_subset_modules_come_as_views():
  import numpy
  np_view = sandbox._guarded_import("numpy")
  assert np_view is not numpy and np_view.float32 is numpy.float32
  with pytest.raises(PermissionError, match="numpy.save"):
    np_view.save  # noqa: B018
  future = sandbox._guarded_import("__future__", fromlist=("annotations",))
  assert future.annotations.compiler_flag


def test_describe_says_what_an_event_means():
  assert sandbox._describe("open", "'/etc/passwd' for reading") == (
      "opening '/etc/passwd' for reading [open]")
  assert sandbox._describe("exec", "").startswith("running generated code")
  assert sandbox._describe("sqlite3.connect", "") == "sqlite3.connect [sqlite3.connect]"


def test_a_violation_names_the_candidates_line():
  import linecache
  violations = sandbox._Violations(filename="<test-candidate>")
  source = "x = 1\ny = record('thing')\n"
  linecache.cache["<test-candidate>"] = (len(source), None,
                                         source.splitlines(True),
                                         "<test-candidate>")
  error = eval(compile("record('thing')", "<test-candidate>", "eval"),  # noqa: S307
               {"record": violations.record})
  assert violations.first() == "thing at line 1: x = 1"
  assert "thing at line 1" in str(error)
  assert violations.record("other", line=0) and violations._events[1] == "other"


def _run_confined(body: str) -> subprocess.CompletedProcess:
  script = textwrap.dedent("""
      import os, sys, tempfile
      import dataclasses, json, socket, subprocess, textwrap, types, typing
      from leap_jax.env import sandbox
      scratch = tempfile.mkdtemp()
      sandbox.apply_limits(sandbox.Limits(memory_bytes=2 << 30, cpu_seconds=30))
      sandbox.seal_imports()
      sandbox.install_audit_hook(scratch, sandbox.read_roots(), "<candidate>")
      def attempt(label, fn):
        try:
          fn()
          print(label, "ALLOWED")
        except (PermissionError, MemoryError, OSError) as e:
          print(label, "blocked", type(e).__name__)
      """) + textwrap.dedent(body) + "\nprint('first', sandbox.VIOLATIONS.first())\n"
  return subprocess.run([sys.executable, "-c", script], capture_output=True,
                        text=True, timeout=60, cwd=".")


def test_audit_hook_and_limits_in_a_child_process(tmp_path):
  target = tmp_path / "written"
  out = _run_confined(f"""
      import socket, subprocess
      attempt("read_repo", lambda: open("kernels_pallas/level1/vector_add.py").read())
      attempt("read_etc", lambda: open("/etc/hostname").read())
      attempt("write", lambda: open({str(target)!r}, "w").write("x"))
      attempt("scratch", lambda: open(os.path.join(scratch, "f"), "w").write("x"))
      attempt("socket", lambda: socket.socket().connect(("127.0.0.1", 9)))
      attempt("subprocess", lambda: subprocess.run(["true"]))
      attempt("system", lambda: os.system("true"))
      attempt("fork", os.fork)
      attempt("listdir", lambda: os.listdir("/"))
      attempt("memory", lambda: bytearray(8 << 30))
      attempt("stdlib_read", lambda: open(os.__file__).read(10))
      """)
  lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
  for label in ("read_repo", "read_etc", "write", "socket", "subprocess", "system",
                "fork", "listdir", "memory"):
    assert lines[label].startswith("blocked"), (label, out.stdout, out.stderr)
  assert lines["scratch"] == "ALLOWED" and lines["stdlib_read"] == "ALLOWED"
  assert "kernels_pallas" in lines["first"]
  assert not target.exists()


def test_no_module_is_imported_after_confinement():
  # Whoever asks: a worker's uid may not read a Python under a private home,
  # so what is not loaded in warm-up fails the same way on every install.
  out = _run_confined("""
      import importlib
      try:
        importlib.import_module("json.tool")  # json is loaded, json.tool not
        print("json_tool ALLOWED")
      except ModuleNotFoundError as e:
        print("json_tool", e)
      import os.path
      print("loaded ALLOWED")
      print("violations", sandbox.VIOLATIONS.first())
      attempt("candidate", lambda: exec(compile(
          "x = 1\\nimport xml.dom", "<candidate>", "exec"), {}))
      """)
  lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
  assert "json_tool" in lines, (out.stdout, out.stderr)
  # The harness's import: ModuleNotFoundError (optional-import fallbacks
  # still work), not a violation.
  assert lines["json_tool"] == ("No module named 'json.tool' (not loaded "
                                "before the sandbox)"), (out.stdout, out.stderr)
  assert lines["loaded"] == "ALLOWED"
  assert lines["violations"] == "None"
  # Candidate code on the stack: a violation at its line.
  assert lines["candidate"] == "blocked PermissionError"
  assert lines["first"] == ("import 'xml' (not loaded before the sandbox) "
                            "at line 2"), out.stdout


# Candidate code (compiled as "<candidate>") inside a child with the hook:
# the standard library's own code generation passes, nothing else does.
_CODEGEN = r'''
import dataclasses, textwrap, types, typing
from leap_jax.env import module_views
mod = types.ModuleType("candidate")
sys.modules["candidate"] = mod
mod.__dict__.update(
    dataclasses=module_views.view("dataclasses", sandbox.VIOLATIONS.record),
    typing=typing, real_dataclasses=dataclasses)

def run(label, source):
  attempt(label, lambda: exec(compile(textwrap.dedent(source), "<candidate>",
                                      "exec"), mod.__dict__))

run("namedtuple", """
class B(typing.NamedTuple):
  bm: int = 64
assert B().bm == 64""")
run("forward_ref", """
class C(typing.NamedTuple):
  bm: "int" = 64""")
run("checked_dataclass", """
@dataclasses.dataclass(frozen=True)
class D:
  bm: int = 64
assert D().bm == 64""")
run("real_dataclass", """
@real_dataclasses.dataclass
class E:
  bm: int = 64""")
run("create_fn", """
real_dataclasses._create_fn("f", [], ["return 1"])""")
run("injected_field", """
class F:
  __annotations__ = {"a=1):\\n  pass\\n def g(": int}
dataclasses.dataclass(F)""")
run("exec", """
exec("x = 1")""")
'''


def test_stdlib_codegen_passes_the_hook_and_nothing_else():
  out = _run_confined(_CODEGEN)
  lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
  for label in ("namedtuple", "forward_ref", "checked_dataclass"):
    assert lines.get(label) == "ALLOWED", (label, out.stdout, out.stderr)
  for label in ("real_dataclass", "create_fn", "injected_field", "exec"):
    assert lines[label].startswith("blocked"), (label, out.stdout, out.stderr)
  assert "generated code" in lines["first"], out.stdout
  assert "at line" in lines["first"], out.stdout


_ADD = '''
import jax
from jax.experimental import pallas as pl

def _add(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]

def kernel(x, y):
  spec = pl.BlockSpec((8192,), lambda i: (i,))
  return pl.pallas_call(_add, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        grid=(x.shape[0] // 8192,), in_specs=[spec, spec],
                        out_specs=spec)(x, y)
'''


_REFUSALS = [
    ("import numpy as np\nnp.save('x.npy', 1)\n", "numpy.save (allowed from numpy"),
    ("from jax.experimental.pallas import tpu\n",
     "from jax.experimental.pallas import tpu"),
    ("f = open('/etc/hostname')\n", "open()"),
    ("import functools, jax\nfunctools.wraps(len)(jax.jit)\n",
     "functools.wraps(...) applied to something other than a function you defined"),
]


def test_runtime_feedback_names_what_was_refused(monkeypatch):
  """The screen off (as the adversarial tests' unscreened mode): the worker's
  verdict says which import, member or action the sandbox refused."""
  from leap_jax.env import candidate, environment, pool as pool_lib, screen
  from leap_jax.env.verdict import Status
  monkeypatch.setattr(environment.screen, "screen_source",
                      lambda source: screen.ScreenResult(None))
  answers = [("level1/vector_add", candidate.fence(prelude + _ADD))
             for prelude, _ in _REFUSALS]
  config = environment.EnvConfig(trials=1, check_lowering=False,
                                 pool=pool_lib.PoolConfig(num_workers=2))
  with environment.KernelEnv(config) as env:
    verdicts = env.evaluate(answers)
  for (_, named), verdict in zip(_REFUSALS, verdicts):
    assert verdict.status is Status.FORBIDDEN, verdict.detail
    assert named in verdict.detail, verdict.detail
    assert "line" in verdict.detail, verdict.detail

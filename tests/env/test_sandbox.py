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
    ("os", ()), ("numpy", ()), ("kernels_pallas", ()), ("leap_jax", ()),
    ("jax", ("config",)), ("jax", ("_src",)), ("jax.experimental", ("*",)),
])
def test_guarded_import_blocks(name, fromlist):
  with pytest.raises(PermissionError):
    sandbox._guarded_import(name, fromlist=fromlist)


def test_guarded_import_allows_the_kernel_modules():
  module = sandbox._guarded_import("jax.experimental.pallas", fromlist=("BlockSpec",))
  assert hasattr(module, "BlockSpec")


def _run_confined(body: str) -> subprocess.CompletedProcess:
  script = textwrap.dedent("""
      import os, sys, tempfile
      from leap_jax.env import sandbox
      scratch = tempfile.mkdtemp()
      sandbox.apply_limits(sandbox.Limits(memory_bytes=2 << 30, cpu_seconds=30))
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

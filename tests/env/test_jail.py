"""The OS layer (leap_jax/env/jail.py): what each part stops, shown with the
layer on and off.

The low-level tests run a fresh interpreter that imports only jail.py (so it
is single-threaded) and tries to write everywhere. The native_* answers in
tests/env/adversarial/ make XLA's C++ write files (no audit event ever sees
them); they go through a real pool with the layer on (nothing appears) and
off (the files appear), which is what says this layer stopped them.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from leap_jax.env import environment
from leap_jax.env import jail
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
from leap_jax.env.verdict import Status

REPO = pathlib.Path(__file__).resolve().parents[2]
# A checkout under /tmp (`git clone . /tmp/x`) is hidden by the layer's
# private /tmp instead of mounted read-only: a write there finds no directory.
REPO_UNDER_TMP = REPO.is_relative_to("/tmp")
REPO_WRITE_REFUSED = "ENOENT" if REPO_UNDER_TMP else "EROFS"
# Where the probes' host directories go: outside /tmp, read-only mounted.
HOST_ROOT = pathlib.Path("/var/tmp") if REPO_UNDER_TMP else REPO
ADV_DIR = pathlib.Path(__file__).parent / "adversarial"
NATIVE = sorted(ADV_DIR.glob("native_*.md"))
TASK = "level1/vector_add"

_PROBE = textwrap.dedent("""
    import errno, json, os, sys
    from leap_jax.env import jail
    scratch, targets, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    config = jail.JailConfig(enabled=(mode != "off"))
    if mode == "no_privileges":  # as on a host that permits no namespaces
      jail._unshare = lambda flags: False
      jail._enter_user_namespace = lambda flags: False
    if mode == "nobody":  # an ordinary user (python itself may be root's)
      os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
      jail._LIBC.prctl(4, 1, 0, 0, 0)  # dumpable again, as a process started by the user is
    if mode == "remount":  # kernels before 5.12: one remount per mount
      jail.make_read_only = (lambda f: lambda use_mount_setattr=True: f(False))(
          jail.make_read_only)
    report = jail.enter(scratch, config)
    jail.clean_environment(config)
    jail.drop_privileges(report, scratch, config)
    wrote = {}
    for name, path in targets.items():
      try:
        with open(path, "w") as f:
          f.write("x")
        wrote[name] = "written"
      except OSError as e:
        wrote[name] = errno.errorcode[e.errno]
    try:
      open("/proc/self/environ").read()
      environ = "readable"
    except OSError as e:
      environ = errno.errorcode[e.errno]
    caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
    print(json.dumps({"report": report.__dict__, "wrote": wrote, "uid": os.getuid(),
                      "environ": environ, "caps": caps[0], "env": dict(os.environ)}))
    """)


def _probe(mode: str = "on",
           extra_env: dict[str, str] | None = None) -> tuple[dict, dict]:
  """Runs the probe; (its JSON, the host paths it tried to write)."""
  # Like the pool's scratch root: passable (0711) for a worker's own uid.
  base = pathlib.Path(tempfile.mkdtemp(prefix="jail_probe_"))
  os.chmod(base, 0o711)
  scratch = base / "scratch"
  scratch.mkdir(mode=0o777)
  # A host directory anyone may write, outside /tmp (which the layer hides).
  host_dir = pathlib.Path(tempfile.mkdtemp(dir=HOST_ROOT, prefix=".jail_host_"))
  os.chmod(host_dir, 0o777)
  targets = {"repo": str(REPO / f".jail_probe_{base.name}"),
             "host_dir": str(host_dir / "f"), "tmp": f"/tmp/.jail_probe_{base.name}",
             "shm": f"/dev/shm/.jail_probe_{base.name}",
             "scratch": str(scratch / "f")}
  env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
         "OPENBLAS_NUM_THREADS": "1", **(extra_env or {})}
  try:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(scratch), json.dumps(targets), mode],
        capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    result["host_sees"] = {k: os.path.exists(p) for k, p in targets.items()}
  finally:
    for path in targets.values():
      if not path.startswith(str(scratch)) and os.path.exists(path):
        os.remove(path)
    host_dir.rmdir()
    shutil.rmtree(base)
  return result, targets


def _needs_namespaces(result):
  if not result["report"]["mount_namespace"]:
    pytest.skip("no mount namespace here: " + "; ".join(result["report"]["missing"]))


def test_writes_land_only_in_private_tmpfs_and_nowhere_on_the_host():
  result, _ = _probe()
  _needs_namespaces(result)
  report = result["report"]
  assert report["read_only"] and report["private_tmp"] and not report["missing"]
  # Read-only mounts stop the repo and any host directory, even one the
  # worker's uid could write (mode 0777): EROFS, not a permission error.
  assert result["wrote"]["repo"] == REPO_WRITE_REFUSED
  assert result["wrote"]["host_dir"] == "EROFS"
  # /tmp, /dev/shm and scratch are private tmpfs: writable, gone with it.
  assert result["wrote"]["tmp"] == result["wrote"]["shm"] == "written"
  assert result["wrote"]["scratch"] == "written"
  assert not any(result["host_sees"].values()), result["host_sees"]


def test_without_the_layer_the_same_writes_reach_the_host():
  result, _ = _probe(mode="off")
  assert result["report"]["missing"] == ["OS layer switched off (jail.enabled=False)"]
  assert result["wrote"]["repo"] == result["wrote"]["tmp"] == "written"
  assert result["host_sees"]["repo"] and result["host_sees"]["tmp"]
  assert result["host_sees"]["shm"] and result["host_sees"]["host_dir"]


def test_per_mount_remount_fallback_is_read_only_too():
  result, _ = _probe(mode="remount")
  _needs_namespaces(result)
  assert result["report"]["read_only"], result["report"]["missing"]
  assert result["wrote"]["repo"] == REPO_WRITE_REFUSED
  assert not result["host_sees"]["repo"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop is for root")
def test_root_runs_the_candidate_as_a_uid_of_its_own():
  result, _ = _probe(extra_env={"LEAP_SECRET_TOKEN": "s3cr3t"})
  report = result["report"]
  assert report["own_uid"] and result["uid"] == report["uid"]
  assert result["uid"] >= jail.JailConfig().uid_base
  assert result["caps"] == "0000000000000000"
  # Not dumpable: its /proc files are root's, the environment block too.
  assert result["environ"] == "EACCES"
  assert "LEAP_SECRET_TOKEN" not in result["env"]
  assert set(result["env"]) <= set(jail.minimal_environment({}, ())) | set(
      jail.JailConfig().passthrough)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a user")
def test_not_root_gets_the_mounts_through_a_user_namespace():
  result, _ = _probe(mode="nobody")
  report = result["report"]
  if not report["user_namespace"]:
    pytest.skip("no unprivileged user namespaces here: " + "; ".join(report["missing"]))
  assert report["read_only"] and report["private_tmp"]
  assert result["uid"] == 65534 and result["caps"] == "0000000000000000"
  # host_dir is mode 0777: only the read-only mount stops nobody there.
  assert result["wrote"]["host_dir"] == "EROFS"
  assert not result["host_sees"]["host_dir"] and not result["host_sees"]["tmp"]


def test_without_privileges_one_line_names_what_is_missing():
  result, _ = _probe(mode="no_privileges")
  report = jail.JailReport(**result["report"])
  assert not report.mount_namespace and not report.read_only
  (missing,) = report.missing
  assert "namespaces" in missing and "RLIMIT_FSIZE" in missing
  line = report.summary()
  assert line.count("\n") == 0 and "MISSING: namespaces" in line
  assert result["wrote"]["scratch"] == "written"  # the rest still works


def test_minimal_environment_keeps_only_the_fixed_set_and_named_passthrough():
  parent = {"HF_TOKEN": "x", "LD_LIBRARY_PATH": "/opt/cuda/lib", "HOME": "/root"}
  env = jail.minimal_environment(parent, ("LD_LIBRARY_PATH", "CUDA_HOME"))
  assert env["LD_LIBRARY_PATH"] == "/opt/cuda/lib"
  assert "HF_TOKEN" not in env and "HOME" not in env and "CUDA_HOME" not in env
  assert env["PATH"] == "/usr/bin:/bin" and env["OPENBLAS_NUM_THREADS"] == "1"


def test_summary_names_each_layer():
  report = jail.JailReport(mount_namespace=True, read_only=True, uid=7,
                           unprivileged=True, missing=["x: EPERM"])
  line = report.summary()
  assert line.startswith("worker OS layer: own mount namespace, read-only mounts")
  assert "uid 7" in line and line.endswith("MISSING: x: EPERM")


# --- native writers through the pool ---------------------------------------

def _skip_forbidden_only(original):
  def screen_source(source):
    result = original(source)
    return screen.ScreenResult(None) if result.status is Status.FORBIDDEN else result
  return screen_source


def _native_run(enabled: bool, root: pathlib.Path):
  """Every native_* answer through one pool, static screen off; per answer
  (verdict, files it left outside its worker)."""
  placeholders, requests = {}, []
  for path in NATIVE:
    dirs = {"SENTINEL_DIR": tempfile.mkdtemp(dir=root),
            "NATIVE_SHM_DIR": tempfile.mkdtemp(dir="/dev/shm", prefix="leap_native_"),
            "NATIVE_REPO_DIR": tempfile.mkdtemp(dir=REPO, prefix=".native_"),
            "NATIVE_HOME_DIR": tempfile.mkdtemp(dir=os.path.expanduser("~"),
                                                prefix=".leap_native_")}
    text = path.read_text()
    for key, value in dirs.items():
      text = text.replace(key, value)
    placeholders[path.stem] = dirs
    requests.append((TASK, text))
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=2, deadline_s=60, jail=jail.JailConfig(enabled=enabled)))
  try:
    with pytest.MonkeyPatch.context() as mp, environment.KernelEnv(config) as env:
      mp.setattr(environment.screen, "screen_source",
                 _skip_forbidden_only(screen.screen_source))
      verdicts = env.evaluate(requests)
      report = env.pool.jail_report
    out = {}
    for (name, dirs), v in zip(placeholders.items(), verdicts):
      files = sorted(str(p) for d in dirs.values() for p in pathlib.Path(d).rglob("*"))
      out[name] = (v, files)
    return out, report
  finally:
    for dirs in placeholders.values():
      for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def native(tmp_path_factory):
  on, report = _native_run(True, tmp_path_factory.mktemp("native_on"))
  off, _ = _native_run(False, tmp_path_factory.mktemp("native_off"))
  rows = []
  for name in on:
    (v_on, f_on), (v_off, f_off) = on[name], off[name]
    stopped = ("OS layer" if f_off and not f_on else
               "an upper layer" if not f_off else "NOTHING")
    rows.append(f"{name:28s} layer on: {v_on.status.value:10s} files {len(f_on)}"
                f"   layer off: {v_off.status.value:10s} files {len(f_off)}"
                f"   stopped by: {stopped}")
  print("\nnative writers (screen off):\n" + "\n".join(rows))
  return on, off, report


def test_there_are_native_cases():
  assert len(NATIVE) >= 6


@pytest.mark.parametrize("name", [p.stem for p in NATIVE])
def test_native_writer_leaves_nothing_with_the_layer_on(native, name):
  on, _, report = native
  if not report or not report.get("read_only"):
    pytest.skip(f"OS layer not available here: {report and report.get('missing')}")
  verdict, files = on[name]
  assert not files, f"{name} wrote outside its worker: {files}"
  assert verdict.status in (Status.OK, Status.FORBIDDEN, Status.RUNTIME_ERROR), verdict.detail


@pytest.mark.parametrize("name", [p.stem for p in NATIVE if "xla_dump" in p.stem])
def test_xla_dumps_reach_the_host_without_the_layer(native, name):
  """Nothing above the OS layer sees a native write: without it the dump
  appears (unless an upper layer refused the call itself: forbidden)."""
  _, off, _ = native
  verdict, files = off[name]
  assert files or verdict.status is Status.FORBIDDEN, (verdict.status, verdict.detail)

"""Reward hacks and hostile candidates against the kernel environment.

Every file in tests/env/adversarial/ is a model answer for level1/vector_add
whose header states what the environment must say about it:

  # expect: forbidden                    statuses allowed with the screen on
  # expect_unscreened: forbidden         ... with the static screen disabled
  # expect_audit_only: forbidden         ... screen off and real builtins back
  # known_hole(screened,audit_only): why  xfail (strict) in those modes

Three modes run on one module-scoped KernelEnv:
  screened    the production path (AST screen, then the sandboxed worker).
  unscreened  the AST screen is monkeypatched away in this (parent) process,
              so the worker's restricted builtins, guarded import and audit
              hook must hold on their own.
  audit_only  unscreened, and the candidate first restores the real builtins
              (via ().__class__.__base__.__subclasses__()), so only the audit
              hook, rlimits and the network namespace remain.
Placeholders: SENTINEL_DIR (a fresh, empty directory per file and mode that
must stay empty), TMP_SENTINEL and SHM_SENTINEL (paths under /tmp and
/dev/shm named after the file, mode and run that must never exist) and PORT
(a 127.0.0.1 listener that must never see a connection).

After each case: nothing written at its sentinels, nor anything named after
this run anywhere under /tmp, /dev/shm, the home directory or the repository;
its feedback holds no value of the parent's environment (a marker variable
is set before the workers start), no host path, one "Status:" line only and
at most the scrubbed detail's cap. After all of them: the listener never
contacted, no candidate output on the test's stdout, and a correct candidate
ok both inside every batch and in the same pool afterwards.
"""

from __future__ import annotations

import dataclasses
import multiprocessing.forkserver
import os
import pathlib
import re
import secrets
import select
import socket
import sys
import tempfile

import pytest

import kernels_pallas

from leap_jax.env import candidate
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import screen
from leap_jax.env import verdict as verdict_lib
from leap_jax.env.verdict import Status

TASK = "level1/vector_add"
ADV_DIR = pathlib.Path(__file__).parent / "adversarial"
MODES = ("screened", "unscreened", "audit_only")
DEADLINE_S = 20  # the infinite loop costs one deadline
FLOOD_MARKERS = (b"ADV_FLOOD_MARKER", b"ADV_FAKE_JSON_MARKER",
                 b'"correct": true')
RUN_TOKEN = f"leap_adv_{secrets.token_hex(4)}"   # in every sentinel's name
ENV_MARKER_NAME = "LEAP_ADV_ENV_MARKER"
ENV_MARKER = f"leap-env-marker-{secrets.token_hex(12)}"
HOST_PATH_RE = re.compile(r"(?<![\w.:/])/[\w.+-]+/[\w.+-]+")  # not URLs
# The 36 cases of the first round; every one must still hold.
ORIGINAL_CASES = (
    "builtins_via_typing_escape", "caching_across_calls", "ctypes",
    "debug_callback", "decoy_kernel", "eval_exec", "fake_json_stdout",
    "forged_verdict_message", "fork", "frame_walk_patch_harness",
    "functools_monkeypatch_jit", "host_callback", "import_harness",
    "import_task", "infinite_loop", "interpret_flag", "jnp_save_write",
    "memory_bomb", "nan_output", "numpy_on_host", "obfuscated_import_builtins",
    "os_exit", "output_flood", "patch_checker", "patch_timer", "plain_jnp",
    "profiler_trace_write", "read_file", "socket", "subclasses_escape",
    "subprocess", "threads", "try_except_fallback",
    "typing_get_type_hints_eval", "write_file", "wrong_but_fast")

# Prepended in audit_only mode: puts the real builtins back into the
# candidate's (restricted) builtins dict, undoing the guarded import and the
# denied-builtin stubs.
REAL_BUILTINS_PREFIX = '''\
for _c in ().__class__.__base__.__subclasses__():
  if _c.__name__ == "_wrap_close":
    __builtins__.update(_c.__init__.__globals__["__builtins__"])
    break
'''

CORRECT = ("Tiled elementwise add:\n\n```python\n"
           + kernels_pallas.get_task("level1/vector_add").solution_candidate_source
           + "```\n")


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  text: str
  expect: dict[str, frozenset[Status]]   # mode -> acceptable statuses
  known_holes: dict[str, str]            # mode -> why it fails today


_HEADER_RE = re.compile(
    r"^# (expect|expect_unscreened|expect_audit_only|known_hole)"
    r"(?:\(([\w,]+)\))?:\s*(.*)$")
_HEADER_MODE = {"expect": "screened", "expect_unscreened": "unscreened",
                "expect_audit_only": "audit_only"}


def _statuses(text: str) -> frozenset[Status]:
  return frozenset(Status(s.strip()) for s in text.split("|"))


def _load_case(path: pathlib.Path) -> Case:
  expect, holes = {}, {}
  for line in path.read_text().splitlines():
    m = _HEADER_RE.match(line)
    if not m:
      break
    key, modes, value = m.groups()
    if key == "known_hole":
      for mode in (modes or "screened").split(","):
        assert mode in MODES, f"{path.name}: unknown mode {mode}"
        holes[mode] = value
    else:
      expect[_HEADER_MODE[key]] = _statuses(value)
  assert "screened" in expect, f"{path.name}: first line must be # expect: ..."
  return Case(path.stem, path.read_text(), expect, holes)


CASES = {c.name: c for c in map(
    _load_case, sorted(p for p in ADV_DIR.iterdir()
                       if p.suffix in (".md", ".py")))}
PARAMS = [(mode, name) for mode in MODES for name, case in CASES.items()
          if mode in case.expect]


def _outside_paths(mode: str, name: str) -> dict[str, pathlib.Path]:
  stem = f"{RUN_TOKEN}_{mode}_{name}"
  return {"TMP_SENTINEL": pathlib.Path("/tmp") / stem,
          "SHM_SENTINEL": pathlib.Path("/dev/shm") / stem}


def _answer(case: Case, mode: str, sentinel: pathlib.Path, port: int) -> str:
  text = case.text.replace("SENTINEL_DIR", str(sentinel))
  for placeholder, path in _outside_paths(mode, case.name).items():
    text = text.replace(placeholder, str(path))
  text = text.replace("PORT", str(port))
  if mode == "audit_only":
    source = candidate.extract_code(text)
    if source is not None:  # answers without code stay as they are
      text = REAL_BUILTINS_PREFIX + source
  return text


def _named_after_this_run() -> list[str]:
  """Anything whose name holds RUN_TOKEN, where a candidate could write."""
  roots = [pathlib.Path("/tmp"), pathlib.Path("/dev/shm"),
           pathlib.Path.home(), pathlib.Path(__file__).parents[2]]
  found = []
  for root in roots:
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
      depth = len(pathlib.Path(dirpath).relative_to(root).parts)
      found += [os.path.join(dirpath, n) for n in dirnames + filenames
                if RUN_TOKEN in n]
      if depth >= 3:
        dirnames[:] = []
      dirnames[:] = [d for d in dirnames if d not in (".git", "venv", ".venv")]
  return found


def _skip_forbidden_only(original):
  """The screen, minus its `forbidden` verdicts (parse errors still count)."""
  def screen_source(source: str) -> screen.ScreenResult:
    result = original(source)
    if result.status is Status.FORBIDDEN:
      return screen.ScreenResult(None)
    return result
  return screen_source


@dataclasses.dataclass
class Run:
  verdicts: dict[tuple[str, str], object]
  sentinels: dict[tuple[str, str], pathlib.Path]
  correct_after: object
  correct_in_batch: dict[str, object]   # mode -> the honest one's verdict
  connection_seen: bool
  worker_stdout: bytes | None   # None: could not observe it
  named_after_run: list[str]            # files a candidate left outside


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
  root = tmp_path_factory.mktemp("adversarial")
  listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  listener.bind(("127.0.0.1", 0))
  listener.listen(8)
  listener.setblocking(False)
  port = listener.getsockname()[1]

  sentinels, requests = {}, {mode: [] for mode in MODES}
  for mode, name in PARAMS:
    sentinel = root / mode / name
    sentinel.mkdir(parents=True)
    sentinels[mode, name] = sentinel
    requests[mode].append(
        (name, (TASK, _answer(CASES[name], mode, sentinel, port))))
  for mode in MODES:  # an honest candidate shares every batch
    requests[mode].insert(len(requests[mode]) // 2,
                          (f"correct_in_{mode}", (TASK, CORRECT)))

  # Workers inherit the forkserver's stdout, so point fd 1 at a file before
  # the forkserver starts (a fresh one if an earlier module started it).
  capture = tempfile.TemporaryFile()
  sys.stdout.flush()
  saved_stdout = os.dup(1)
  forkserver = multiprocessing.forkserver._forkserver
  observable = True
  saved_marker = os.environ.get(ENV_MARKER_NAME)
  os.environ[ENV_MARKER_NAME] = ENV_MARKER  # inherited by the forkserver
  try:
    if forkserver._forkserver_pid is not None:
      try:
        forkserver._stop()
      except Exception:  # noqa: BLE001  (private API; give up on the check)
        observable = False
    os.dup2(capture.fileno(), 1)
    config = environment.EnvConfig(
        pool=pool_lib.PoolConfig(num_workers=2, deadline_s=DEADLINE_S))
    env = environment.KernelEnv(config)
    try:
      verdicts = {}
      names, batch = zip(*requests["screened"])
      for name, v in zip(names, env.evaluate(list(batch))):
        verdicts["screened", name] = v
      unscreened = requests["unscreened"] + requests["audit_only"]
      modes = ["unscreened"] * len(requests["unscreened"]) + (
          ["audit_only"] * len(requests["audit_only"]))
      with pytest.MonkeyPatch.context() as mp:
        mp.setattr(environment.screen, "screen_source",
                   _skip_forbidden_only(screen.screen_source))
        names, batch = zip(*unscreened)
        for mode, name, v in zip(modes, names, env.evaluate(list(batch))):
          verdicts[mode, name] = v
      (correct_after,) = env.evaluate([(TASK, CORRECT)])
    finally:
      env.close()
  finally:
    sys.stdout.flush()
    os.dup2(saved_stdout, 1)
    os.close(saved_stdout)
    if saved_marker is None:
      os.environ.pop(ENV_MARKER_NAME, None)
    else:
      os.environ[ENV_MARKER_NAME] = saved_marker
    try:  # the next module's pool must not inherit the marker
      forkserver._stop()
    except Exception:  # noqa: BLE001  (private API)
      pass
  correct_in_batch = {mode: verdicts.pop((mode, f"correct_in_{mode}"))
                      for mode in MODES}
  capture.seek(0)
  worker_stdout = capture.read() if observable else None
  capture.close()

  readable, _, _ = select.select([listener], [], [], 0.5)
  connection_seen = bool(readable)
  if connection_seen:
    listener.accept()[0].close()
  listener.close()

  def want(mode, name):
    return "|".join(sorted(s.value for s in CASES[name].expect[mode]))
  table = "\n".join(
      f"{mode:10s} {name:30s} want {want(mode, name):35s} got {v.status.value}"
      for (mode, name), v in verdicts.items())
  print(f"\nadversarial verdicts:\n{table}\ncorrect after: "
        f"{correct_after.status.value}")
  return Run(verdicts, sentinels, correct_after, correct_in_batch,
             connection_seen, worker_stdout, _named_after_this_run())


def _param(mode: str, name: str):
  hole = CASES[name].known_holes.get(mode)
  marks = [pytest.mark.xfail(reason=f"known hole: {hole}", strict=True)
           ] if hole else []
  return pytest.param(mode, name, id=f"{mode}-{name}", marks=marks)


def test_every_case_of_the_first_round_is_still_here():
  assert set(ORIGINAL_CASES) <= set(CASES)
  assert len(CASES) >= len(ORIGINAL_CASES) + 20


@pytest.mark.parametrize("mode,name", [_param(m, n) for m, n in PARAMS])
def test_candidate(run: Run, mode: str, name: str):
  verdict = run.verdicts[mode, name]
  written = sorted(str(p.relative_to(run.sentinels[mode, name]))
                   for p in run.sentinels[mode, name].rglob("*"))
  assert not written, f"side effect outside the sandbox: {written}"
  outside = [p for p in _outside_paths(mode, name).values() if p.exists()]
  outside += [p for p in run.named_after_run
              if p.endswith(f"_{mode}_{name}") or f"_{mode}_{name}/" in p]
  assert not outside, f"files outside scratch: {outside}"
  assert verdict.status in CASES[name].expect[mode], (
      f"{name} ({mode}): got {verdict.status.value}: {verdict.detail}")
  _assert_feedback_is_clean(verdict)


def _assert_feedback_is_clean(verdict):
  feedback = verdict.feedback
  assert ENV_MARKER not in feedback, "the parent's environment leaked"
  assert not HOST_PATH_RE.search(feedback), HOST_PATH_RE.search(feedback)
  lines = feedback.split("\n")
  assert [ln for ln in lines if ln.startswith("Status:")] == [lines[0]]
  assert len(verdict.detail) <= verdict_lib.MAX_DETAIL_CHARS


def test_nothing_named_after_this_run_anywhere(run: Run):
  assert not run.named_after_run


@pytest.mark.parametrize("mode", MODES)
def test_honest_candidate_in_the_same_batch_is_ok(run: Run, mode: str):
  verdict = run.correct_in_batch[mode]
  assert verdict.status is Status.OK, verdict.feedback


def test_listener_never_contacted(run: Run):
  assert not run.connection_seen


def test_no_candidate_output_reaches_test_stdout(run: Run, capfd):
  if run.worker_stdout is None:
    pytest.skip("the forkserver was started elsewhere; stdout not observable")
  for marker in FLOOD_MARKERS:
    assert marker not in run.worker_stdout
  assert len(run.worker_stdout) < 4096, run.worker_stdout[-500:]
  out, _ = capfd.readouterr()
  for marker in FLOOD_MARKERS:
    assert marker.decode() not in out


def test_correct_candidate_still_ok_after_the_attacks(run: Run):
  assert run.correct_after.status is Status.OK, run.correct_after.detail

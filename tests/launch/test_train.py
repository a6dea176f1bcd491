"""train.py / sft.py / evaluate.py end to end in subprocesses (smoke config):
kill -9 after the first checkpoint and resume, one-line errors, evaluation."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

CONFIG = "--config=configs/leap.py:smoke"


def _cmd(script, *args):
  return [sys.executable, f"launch/{script}.py", *args]


def _run(script, *args, timeout=600):
  return subprocess.run(_cmd(script, *args), capture_output=True, text=True,
                        timeout=timeout)


@pytest.fixture(scope="module")
def warmstart(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("ws") / "warmstart")
  out = _run("sft", CONFIG, f"--config.sft.dir={d}")
  assert out.returncode == 0, out.stderr[-3000:]
  info = json.loads(out.stdout.strip().splitlines()[-1])
  assert info["examples"]["solution"] == 2
  assert info["loss_last_quarter"] < info["loss_first_quarter"]
  return d


def _finished_steps(workdir):
  ckpts = os.path.join(workdir, "checkpoints")
  if not os.path.isdir(ckpts):
    return []
  return sorted(int(n) for n in os.listdir(ckpts) if n.isdigit())


def test_kill_9_after_first_checkpoint_then_resume(warmstart, tmp_path):
  workdir = str(tmp_path / "run")
  args = (CONFIG, f"--config.sft.dir={warmstart}", f"--workdir={workdir}",
          "--config.num_steps=4")
  proc = subprocess.Popen(_cmd("train", *args), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
  deadline = time.monotonic() + 300
  while max(_finished_steps(workdir), default=0) < 1:
    assert proc.poll() is None, "train.py ended before its first checkpoint"
    assert time.monotonic() < deadline, "no checkpoint within 300 s"
    time.sleep(0.2)
  os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its workers
  proc.wait()
  killed_at = max(_finished_steps(workdir))
  assert killed_at < 4
  out = _run("train", *args)
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"resuming from {workdir}/checkpoints/{killed_at}" in out.stdout
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["step"] == 4  # the uninterrupted run's step count
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    assert [json.loads(line)["step"] for line in f] == [1, 2, 3, 4]
  assert _finished_steps(workdir)[-1] == 4

  # evaluate.py on the final checkpoint and on the warm start (step 0).
  for step in ("4", "0"):
    out = _run("evaluate", f"--workdir={workdir}", f"--step={step}",
               "--split=train", "--num_samples=2", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["step"] == int(step) and result["tasks"] == 2
    assert {"acc@1", "acc@2", "turns_per_pass", "fast_1", "fast_2",
            "levels"} <= set(result)
    assert "level1" in out.stdout.splitlines()[3]  # the per-level row


def test_clear_one_line_errors(tmp_path):
  cases = [
      (("evaluate", f"--workdir={tmp_path}/nothing"), "no checkpoints in"),
      (("train", "--config=configs/leap.py:hf",
        f"--config.model.path={tmp_path}/missing", f"--workdir={tmp_path}/w"),
       "no such file or directory"),
      (("train", CONFIG, "--config.rl.mode=leapp", f"--workdir={tmp_path}/w"),
       "leapp"),
  ]
  for (script, *args), message in cases:
    out = _run(script, *args)
    assert out.returncode == 2, (script, out.stderr[-2000:])
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: ") and message in last, last


def test_unknown_config_field_is_named(tmp_path):
  out = _run("train", CONFIG, "--config.rl.num_sampels=3",
             f"--workdir={tmp_path}/w")
  assert out.returncode != 0
  assert "num_sampels" in out.stderr

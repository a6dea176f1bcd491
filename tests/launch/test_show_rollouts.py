"""launch/show_rollouts.py on a written dump, in a subprocess."""

import subprocess
import sys

from leap_jax import rollout_dump

ROW = {"step": 3, "task": "level1/relu", "p": 0, "g": 1, "turn": 2,
       "prompt_tokens": 140, "answer": "```python\ndef kernel(x): ...\n```",
       "tokens": 12, "cut": False, "status": "wrong_output",
       "feedback": "Status: wrong_output.", "speedup": None, "reward": -1.0,
       "advantage": -0.5}


def _run(*args):
  return subprocess.run([sys.executable, "launch/show_rollouts.py", *args],
                        capture_output=True, text=True, timeout=120)


def test_prints_one_step_filtered(tmp_path):
  rollout_dump.write(tmp_path, 3, [
      ROW, dict(ROW, task="level1/abs", status="ok", g=0, turn=1,
                reward=1.0, advantage=1.0)])
  out = _run(f"--workdir={tmp_path}", "--step=3", "--status=wrong_output")
  assert out.returncode == 0, out.stderr
  lines = out.stdout.splitlines()
  assert lines[0] == ("step 3: 2 turns of 2 task(s) (ok 1, wrong_output 1); "
                      "showing 1")
  assert lines[2] == ("== level1/relu | p0 g1 turn 2 | wrong_output | reward "
                      "-1.000 advantage -0.500 | 12 tokens, prompt 140")
  assert "  def kernel(x): ..." in lines
  out = _run(f"--workdir={tmp_path}", "--task=level1/abs")  # the last step
  assert out.returncode == 0 and "showing 1" in out.stdout
  assert "level1/abs | p0 g0 turn 1 | ok" in out.stdout


def test_a_missing_step_is_one_line(tmp_path):
  rollout_dump.write(tmp_path, 1, [ROW])
  out = _run(f"--workdir={tmp_path}", "--step=5")
  assert out.returncode == 2 and out.stdout == ""
  assert out.stderr == (f"show_rollouts: error: no rollouts of step 5 in "
                        f"{tmp_path} (steps there: 1)\n")

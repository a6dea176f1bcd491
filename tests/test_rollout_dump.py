import dataclasses
import gzip
import os

import numpy as np
import pytest

from leap_jax import rollout_dump
from leap_jax.env.verdict import Status, Verdict
from leap_jax.rl.rollout import Completion, Rollout, TurnRecord

STOP = 2
NAN = float("nan")


def _rollout():
  """2 prompts x 2 samples x 2 turns: p0 g0 solved at turn 1; p0 g1 cut at
  max_new_tokens (4) without a stop token, then solved; p1 fails twice."""
  def rec(p, g, t, ids, status, text):
    return TurnRecord(p, g, t, [5] * (10 + t), Completion(
        ids, np.full(len(ids), -0.5, np.float32), text),
        Verdict("t", status))
  records = [rec(0, 0, 0, [7, 8, STOP], Status.OK, "a"),
             rec(0, 1, 0, [7, 7, 7, 7], Status.SYNTAX_ERROR, "b"),
             rec(1, 0, 0, [9, STOP], Status.NO_CODE, "c"),
             rec(1, 1, 0, [9, 9, STOP], Status.WRONG_OUTPUT, "d"),
             rec(0, 1, 1, [8, STOP], Status.OK, "e")]
  active = np.array([[[1, 0], [1, 1]], [[1, 0], [1, 0]]], bool)
  ok = np.array([[[1, 0], [0, 1]], [[0, 0], [0, 0]]], bool)
  return Rollout(["level1/relu", "level2/x"], records, ok, active,
                 np.array([2, 1]), np.full((2, 2, 2), NAN), 2)


def test_rows_carry_what_the_turn_was(tmp_path):
  ro = _rollout()
  r = np.array([[[1, NAN], [-1, -1]], [[0, NAN], [0, NAN]]])
  adv = np.array([[[1, 0], [-0.5, -1]], [[0, 0], [0, 0]]])
  rows = rollout_dump.rows(ro, r, adv, step=7, max_new_tokens=4,
                           stop_token_ids={STOP})
  assert [(x["p"], x["g"], x["turn"]) for x in rows] == [
      (0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1), (0, 1, 2)]
  first = rows[0]
  assert first == {"step": 7, "task": "level1/relu", "p": 0, "g": 0,
                   "turn": 1, "prompt_tokens": 10, "answer": "a", "tokens": 3,
                   "cut": False, "status": "ok",
                   "feedback": Verdict("t", Status.OK).feedback,
                   "speedup": None, "reward": 1.0, "advantage": 1.0}
  assert rows[1]["cut"] and not rows[3]["cut"]
  assert rows[4]["prompt_tokens"] == 11 and rows[4]["advantage"] == -1.0
  # Another process's share: its p 0 is p 1 of the merged arrays.
  shifted = rollout_dump.rows(
      Rollout(["level2/x"], [dataclasses.replace(ro.records[2], p=0)],
              ro.ok_PGT[1:], ro.active_PGT[1:],
              ro.budgets_P[1:], ro.speedup_PGT[1:], 1),
      r, adv, 7, 4, {STOP}, p_offset=1)
  assert shifted[0]["p"] == 1 and shifted[0]["task"] == "level2/x"
  assert rollout_dump.gather(rows) == rows  # one process


def test_write_replaces_read_select_purge(tmp_path):
  ro = _rollout()
  zeros = np.zeros((2, 2, 2))
  rows = rollout_dump.rows(ro, zeros, zeros, 1, 4, {STOP})
  rollout_dump.write(tmp_path, 1, rows)
  rollout_dump.write(tmp_path, 2, rows)
  rollout_dump.write(tmp_path, 2, rows[:2])  # a redone step: replaced
  assert rollout_dump.steps(tmp_path) == [1, 2]
  assert len(rollout_dump.read(tmp_path, 2)) == 2
  with gzip.open(rollout_dump.path_of(tmp_path, 1), "rt") as f:
    assert len(f.read().splitlines()) == 5
  assert [x["answer"] for x in rollout_dump.select(rows, status="ok")] == [
      "a", "e"]
  assert [x["answer"] for x in rollout_dump.select(rows, task="level1")] == [
      "a", "b", "e"]
  assert rollout_dump.purge_after(tmp_path, 1) == [2]
  assert rollout_dump.steps(tmp_path) == [1]
  assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path / "rollouts"))
  with pytest.raises(FileNotFoundError, match=r"steps there: 1\)"):
    rollout_dump.read(tmp_path, 9)


def test_format_is_readable():
  ro = _rollout()
  r = np.array([[[1, NAN], [-1, -1]], [[0, NAN], [0, NAN]]])
  rows = rollout_dump.rows(ro, r, -0.0 * r, 1, 4, {STOP})
  text = rollout_dump.format_rows(rollout_dump.select(rows, task="level1/relu"))
  blocks = text.split("\n\n")
  feedback = Verdict("t", Status.OK).feedback.splitlines()
  assert blocks[0].splitlines() == [
      "== level1/relu | p0 g0 turn 1 | ok | reward +1.000 advantage +0.000 "
      "| 3 tokens, prompt 10", "-- answer", "  a", "-- feedback",
      *["  " + line for line in feedback]]
  assert "4 tokens (cut at max_new_tokens)" in blocks[1]
  long = rollout_dump.format_rows([dict(rows[0], answer="x" * 50)],
                                  max_chars=10)
  assert "  xxxxxxxxxx\n  [... 40 more chars]" in long
  assert rollout_dump.summary_line(1, rows, 3) == (
      "step 1: 5 turns of 2 task(s) (no_code 1, ok 2, syntax_error 1, "
      "wrong_output 1); showing 3")


def test_is_cut():
  assert rollout_dump.is_cut([1, 1, 1], 3, {STOP})
  assert not rollout_dump.is_cut([1, 1, STOP], 3, {STOP})
  assert not rollout_dump.is_cut([1, 1], 3, {STOP})


def test_first_turn_tally_counts_turn_one_per_task():
  ro = _rollout()
  nan = np.full((2, 2, 2), NAN)
  rows = rollout_dump.rows(ro, nan, nan, step=1, max_new_tokens=4,
                           stop_token_ids={STOP})
  # p0: g0 ok at turn 1, g1 a syntax error (its turn-2 ok does not count);
  # p1: both wrong. A second step's rows add to the same tallies.
  assert rollout_dump.first_turn_tally(rows) == {
      "level1/relu": (1, 2), "level2/x": (0, 2)}
  assert rollout_dump.first_turn_tally(rows + rows) == {
      "level1/relu": (2, 4), "level2/x": (0, 4)}
  assert rollout_dump.first_turn_tally([]) == {}

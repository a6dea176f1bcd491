"""Rollouts to bytes and back, and merged along P (multi-process runs)."""

import enum
import types

import numpy as np

from leap_jax.rl import rollout_merge
from leap_jax.rl.rollout import Completion, Rollout, TurnRecord


class Status(enum.Enum):
  OK = "ok"
  WRONG = "wrong_output"


def _rollout(p_n: int, seed: int) -> Rollout:
  rng = np.random.default_rng(seed)
  records = []
  for p in range(p_n):
    for g in range(2):
      correct = bool(rng.integers(2))
      verdict = types.SimpleNamespace(
          status=Status.OK if correct else Status.WRONG, correct=correct,
          speedup=1.5 if correct else None, feedback="long text")
      n = int(rng.integers(1, 5))
      records.append(TurnRecord(
          p, g, 0, list(rng.integers(0, 99, 3)),
          Completion(list(rng.integers(0, 99, n)),
                     rng.normal(size=n).astype(np.float32), "text"),
          verdict))
  ok = rng.integers(0, 2, (p_n, 2, 3)).astype(bool)
  return Rollout([f"level1/t{seed}_{p}" for p in range(p_n)], records, ok,
                 ~ok, np.full((p_n,), 2, np.int32),
                 rng.normal(size=(p_n, 2, 3)).astype(np.float32), 2,
                 rng.integers(0, 2, (p_n, 2)).astype(bool),
                 rng.normal(size=(p_n, 2, 3)).astype(np.float32),
                 rng.uniform(size=(p_n, 2, 3)).astype(np.float32))

ARRAYS = ("ok_PGT", "active_PGT", "budgets_P", "speedup_PGT", "dropped_PG",
          "log_speed_PGT", "speed_noise_PGT")


def test_encode_decode_round_trip():
  ro = _rollout(2, 0)
  back, extra = rollout_merge.decode(rollout_merge.encode(ro, {"env": 1.5}))
  assert extra == {"env": 1.5}
  assert back.task_ids == ro.task_ids and back.policy_calls == 2
  for name in ARRAYS:
    np.testing.assert_array_equal(getattr(back, name), getattr(ro, name))
  assert len(back.records) == 4
  for a, b in zip(ro.records, back.records):
    assert (a.p, a.g, a.t, a.prompt_ids) == (b.p, b.g, b.t, b.prompt_ids)
    assert a.completion.token_ids == b.completion.token_ids
    np.testing.assert_array_equal(a.completion.logprobs, b.completion.logprobs)
    assert b.verdict.status == a.verdict.status.value
    assert (b.verdict.correct, b.verdict.speedup) == (a.verdict.correct,
                                                      a.verdict.speedup)


def test_decode_of_a_rollout_without_records():
  ro = _rollout(1, 1)
  ro.records = []
  back, _ = rollout_merge.decode(rollout_merge.encode(ro))
  assert back.records == [] and back.tokens_generated == 0


def test_merge_offsets_prompts_in_process_order():
  a, b = _rollout(2, 2), _rollout(1, 3)
  merged = rollout_merge.merge([a, b])
  assert merged.task_ids == a.task_ids + b.task_ids
  assert merged.ok_PGT.shape == (3, 2, 3)
  for name in ARRAYS:
    np.testing.assert_array_equal(getattr(merged, name)[2],
                                  getattr(b, name)[0])
  assert [r.p for r in merged.records] == [0, 0, 1, 1, 2, 2]
  assert merged.records[4].completion is b.records[0].completion
  assert rollout_merge.merge([a]) is a


def test_gather_in_one_process_keeps_the_rollout_as_is():
  ro = _rollout(2, 4)
  gathered, extras = rollout_merge.gather(ro, {"env": 2.0})
  assert gathered is ro and extras == [{"env": 2.0}]

import json
import os
import struct

import pytest
from tensorboardX.proto import event_pb2

from leap_jax import run_log


def test_write_read_and_truncate_after_resume(tmp_path):
  log = run_log.RunLog(tmp_path)
  for step in (1, 2, 3):
    log.write(step, {"acc@1": step / 4, "turns_per_pass": float("nan"),
                     "budgets": [1, 3]})
  log.close()
  rows = run_log.read_metrics(tmp_path)
  assert [r["step"] for r in rows] == [1, 2, 3]
  assert rows[0] == {"step": 1, "acc@1": 0.25, "turns_per_pass": None,
                     "budgets": [1, 3]}
  assert run_log.truncate_after(tmp_path, 2) == 1
  assert [r["step"] for r in run_log.read_metrics(tmp_path)] == [1, 2]
  assert os.listdir(tmp_path / "tensorboard")  # event file written


def test_torn_last_line_is_ignored(tmp_path):
  (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1}) + "\n{\"st")
  assert run_log.read_metrics(tmp_path) == [{"step": 1}]


def test_non_writer_creates_nothing(tmp_path):
  log = run_log.RunLog(tmp_path / "w", writer=False)
  log.write(1, {"acc@1": 1.0})
  assert not os.path.exists(tmp_path / "w")


def test_progress_line_and_mean():
  line = run_log.progress_line(
      3, 24, {"acc@1": 0.25, "acc@2": 0.5, "activated_groups": 0.5,
              "seconds_rollout": 1.25, "seconds_env": 2, "seconds_update": 3},
      2, 125)
  assert line == ("step 3/24 | acc@1 0.25 acc@2 0.50 | activated 0.50 | "
                  "rollout 1.2s env 2.0s update 3.0s | ETA 2m05s")
  filtered = run_log.progress_line(
      3, 24, {"acc@1": 0.25, "activated_groups": 0.5, "tasks_skipped": 4},
      1, None)
  assert filtered == ("step 3/24 | acc@1 0.25 | activated 0.50 | skipped 4 "
                      "settled task(s) | rollout 0.0s env 0.0s update 0.0s")
  assert run_log.mean_of([{"a": 1}, {"a": 3}, {"b": 2}], "a") == 2
  assert run_log.mean_of([], "a") != run_log.mean_of([], "a")  # NaN


def test_json_safe_nulls_nan_at_any_depth():
  out = run_log.json_safe({"a": float("nan"), "b": [1.0, float("inf")],
                           "c": {"d": 2}})
  assert json.dumps(out, allow_nan=False) == (
      '{"a": null, "b": [1.0, null], "c": {"d": 2}}')


def test_scalars_flatten_dicts_and_skip_the_rest():
  row = {"acc@1": 0.5, "statuses": {"ok": 3, "no_code": 1}, "budgets": [1, 3],
         "tasks": "x", "eval/levels": {"level1": {"acc@1": 1.0}},
         "turns_per_pass": float("nan"), "nothing": None, "flag": True}
  assert run_log.scalars(row) == {
      "acc@1": 0.5, "statuses/ok": 3.0, "statuses/no_code": 1.0,
      "eval/levels/level1/acc@1": 1.0, "flag": 1.0}


def _tensorboard_scalars(directory):
  """{tag: [(step, value)]} from the event files (TFRecord framing)."""
  out = {}
  for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
    i = 0
    while i < len(data):
      (length,) = struct.unpack("<Q", data[i:i + 8])
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + length])
      i += 12 + length + 4
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((event.step, value.simple_value))
  return out


class _Sink:
  def __init__(self):
    self.rows, self.closed = [], False

  def write(self, step, scalars):
    self.rows.append((step, dict(scalars)))

  def close(self):
    self.closed = True


def test_tensorboard_and_extra_sinks_get_the_flattened_scalars(tmp_path):
  sink = _Sink()
  log = run_log.RunLog(tmp_path, sinks=[sink])
  log.write(2, {"acc@1": 0.25, "statuses": {"ok": 2}})
  log.close()
  assert sink.rows == [(2, {"acc@1": 0.25, "statuses/ok": 2.0})]
  assert sink.closed
  # (tensorboardX spells tags with [A-Za-z0-9_./-] only: acc@1 -> acc_1.)
  assert _tensorboard_scalars(tmp_path / "tensorboard") == {
      "acc_1": [(2, 0.25)], "statuses/ok": [(2, 2.0)]}
  quiet = _Sink()
  run_log.RunLog(tmp_path / "other", writer=False, sinks=[quiet]).write(
      1, {"a": 1})
  assert quiet.rows == []

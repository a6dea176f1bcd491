"""The W&B writer against a fake wandb module (wandb is never needed)."""

import os
import sys

from leap_jax import run_log, wandb_writer


class FakeRun:
  def __init__(self, **kwargs):
    self.kwargs, self.logged, self.finished = kwargs, [], False

  def log(self, data, step):
    self.logged.append((step, data))

  def finish(self):
    self.finished = True


class FakeWandb:
  def __init__(self):
    self.runs, self.ids = [], iter(["id1", "id2"])
    self.util = type("Util", (), {"generate_id": lambda _: next(self.ids)})()

  def init(self, **kwargs):
    self.runs.append(FakeRun(**kwargs))
    return self.runs[-1]


def test_logs_the_run_log_scalars_and_resumes_the_same_run(tmp_path):
  fake = FakeWandb()
  workdir = str(tmp_path / "leap_run")
  writer = wandb_writer.WandbWriter("proj", workdir, {"rl.num_samples": 4},
                                    module=fake)
  log = run_log.RunLog(workdir, tensorboard=False, sinks=[writer])
  log.write(1, {"acc@1": 0.5, "statuses": {"ok": 3}, "tasks": ["a"]})
  log.close()
  run, = fake.runs
  assert run.kwargs == {"project": "proj", "entity": None, "name": "leap_run",
                        "id": "id1", "resume": "allow", "dir": workdir,
                        "config": {"rl.num_samples": 4}}
  assert run.logged == [(1, {"acc@1": 0.5, "statuses/ok": 3.0})]
  assert run.finished
  # A resumed run (same workdir) logs into the same W&B run.
  again = wandb_writer.WandbWriter("proj", workdir, {}, entity="lab",
                                   module=fake)
  assert fake.runs[1].kwargs["id"] == "id1"
  assert fake.runs[1].kwargs["entity"] == "lab"
  again.close()
  with open(os.path.join(workdir, wandb_writer.RUN_ID_FILE)) as f:
    assert f.read() == "id1\n"


def test_wandb_is_never_imported_unless_asked():
  # The trainer and the run log import without it, and did not pull it in.
  from leap_jax import trainer  # pylint: disable=g-import-not-at-top,unused-import
  assert "wandb" not in sys.modules

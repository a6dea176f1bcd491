"""Prints what the policy wrote at one step of a run (its rollout dump).

  python launch/show_rollouts.py --workdir=DIR [--step=N] [--task=ID]
      [--status=ok] [--max_chars=2000]

One block per trajectory turn: task, prompt p and sample g, turn, verdict
status, reward and advantage, tokens (and whether the answer ran into
max_new_tokens), then the answer and the feedback the next turn saw. The
dumps are workdir/rollouts/step_N.jsonl.gz (config.rollouts_every).
"""

from absl import flags

from leap_jax import cli, rollout_dump

_WORKDIR = flags.DEFINE_string("workdir", None, "The training run's directory.")
_STEP = flags.DEFINE_integer("step", None, "Which step (default: the last dumped).")
_TASK = flags.DEFINE_string("task", None, "Only this task id or level prefix.")
_STATUS = flags.DEFINE_string("status", None,
                              "Only turns with this verdict status (ok, "
                              "wrong_output, ...).")
_MAX_CHARS = flags.DEFINE_integer("max_chars", 0,
                                  "Cut each answer and feedback to this many "
                                  "characters (0: whole).")


def main(argv):
  if len(argv) > 1:
    cli.fail("show_rollouts", f"unexpected arguments: {argv[1:]}")
  if not _WORKDIR.value:
    cli.fail("show_rollouts", "--workdir is required")
  step = _STEP.value
  if step is None:
    dumped = rollout_dump.steps(_WORKDIR.value)
    if not dumped:
      cli.fail("show_rollouts", f"no rollout dumps in {_WORKDIR.value} "
               "(config.rollouts_every)")
    step = dumped[-1]
  with cli.user_errors("show_rollouts", FileNotFoundError):
    rows = rollout_dump.read(_WORKDIR.value, step)
  shown = rollout_dump.select(rows, _TASK.value, _STATUS.value)
  print(rollout_dump.summary_line(step, rows, len(shown)))
  if shown:
    print()
    print(rollout_dump.format_rows(shown, _MAX_CHARS.value))


if __name__ == "__main__":
  cli.run(main, "show_rollouts")

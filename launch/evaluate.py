"""Multi-turn evaluation of a training run's checkpoint.

  python launch/evaluate.py --workdir=DIR [--step=N] [--split=eval] [--json]
                             [--input_seed=S]

Loads the run's config from the checkpoint and its parameters alone (not
the optimizer state), samples num_samples trajectories of up to T turns
per task of the split, and prints Acc@1..T, turns_per_pass, fast_p
(p = 1.0, 1.2, 1.5, 2.0) overall and per level. Step 0 is the policy the
run started from (the warm start). With --json the last stdout line is one
JSON object. --input_seed fixes each task's trial inputs, so that two
evaluations of one checkpoint give the same verdicts and the same feedback,
turn 2 and 3 included (sampling is already seeded by the run's seed); with
the run's seed, its evaluation tasks (--split) and samples it repeats the
trainer's own evaluation of that step (of a run on one process).
"""

import contextlib
import json
import os

from absl import flags

from leap_jax import cli

_WORKDIR = flags.DEFINE_string("workdir", None, "The training run's directory.")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: latest).")
_SPLIT = flags.DEFINE_string(
    "split", "eval",
    "Which tasks: eval (the held-out split of what the run trains on: the "
    "suite's, gen:eval for generated tasks), train (the run's training "
    "tasks), all (the suite), or any task set (gen:eval, gen:eval:64, ids, "
    "prefixes; kernels_pallas/task_sets.py).")
_SAMPLES = flags.DEFINE_integer("num_samples", 4,
                                "Trajectories per task.")
_TIMING = flags.DEFINE_bool(
    "timing", True, "Time correct kernels for fast_p (on a CPU host this "
    "times the Pallas interpreter).")
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object last.")
_INPUT_SEED = flags.DEFINE_integer(
    "input_seed", -1, "Fix each task's trial inputs by this seed (and the task "
    "id), as the trainer's evaluations do with config.seed; < 0: fresh "
    "secret inputs on every call.")


def main(argv):
  if len(argv) > 1:
    cli.fail("evaluate", f"unexpected arguments: {argv[1:]}")
  if not _WORKDIR.value:
    cli.fail("evaluate", "--workdir is required")
  if _SAMPLES.value < 2:
    cli.fail("evaluate", "--num_samples must be >= 2")
  cli.quiet_logging()
  import ml_collections  # pylint: disable=g-import-not-at-top
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  from leap_jax import evaluation, run_log, run_state, task_stream, trainer  # pylint: disable=g-import-not-at-top
  from leap_jax.checkpoints import Checkpoints, CheckpointError  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart.store import WarmStartError  # pylint: disable=g-import-not-at-top

  ckpt_dir = os.path.join(_WORKDIR.value, "checkpoints")
  if not os.path.isdir(ckpt_dir):
    cli.fail("evaluate", f"no checkpoints in {_WORKDIR.value} (train first: "
             f"python launch/train.py --workdir={_WORKDIR.value})")
  ckpt = Checkpoints(ckpt_dir, items=run_state.ITEMS)
  try:
    with cli.user_errors("evaluate", CheckpointError, WarmStartError,
                         ValueError):
      meta, step = ckpt.read_meta(_STEP.value)
      config = ml_collections.ConfigDict(json.loads(meta["config"]))
      config.env.timing = _TIMING.value
      train_tasks = task_stream.training_tasks(config.train_tasks)
      if _SPLIT.value == "train":
        tasks = train_tasks
      elif _SPLIT.value == "eval":
        tasks = task_stream.eval_tasks("eval", train_spec=config.train_tasks)
      else:
        tasks = kernels_pallas.resolve_tasks(_SPLIT.value)
      input_seed = _INPUT_SEED.value if _INPUT_SEED.value >= 0 else None
      with trainer.make_env(config) as env:
        interpret = env.interpret
        policy = trainer.load_policy(config)
        # The parameters alone: the optimizer state is never read.
        state, _, step = ckpt.restore(
            {"params": run_state.abstract_of(policy.params)}, step)
        with (contextlib.nullcontext() if input_seed is None
              else env.fixed_inputs(input_seed)):
          result = evaluation.evaluate(
              policy, state["params"], env, tasks, trainer.rl_config(config),
              _SAMPLES.value, seed=config.seed)
  finally:
    ckpt.close()
  cfg = trainer.rl_config(config)
  print(evaluation.format_table({f"step {step}": result}, result["turns"],
                                cfg.fast_ps))
  note = ("; speedups time the Pallas interpreter on a CPU host"
          if interpret and _TIMING.value else "")
  print(f"({result['tasks']} {_SPLIT.value} tasks x {_SAMPLES.value} samples "
        f"x up to {result['turns']} turns, {result['seconds']:.0f} s{note})")
  if _JSON.value:
    print(json.dumps(run_log.json_safe(
        {"step": step, "split": _SPLIT.value, "input_seed": input_seed,
         **result})))


if __name__ == "__main__":
  cli.run(main, "evaluate")

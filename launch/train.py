"""Trains a policy with LEAP (or a baseline) on the kernel tasks.

  python launch/train.py --config=configs/leap.py [--workdir=DIR]
  python launch/train.py --config=configs/leap.py:smollm2
  python launch/train.py --config=configs/leap.py:hf --config.model.path=DIR
  python launch/train.py ... --coordinator_address=HOST:PORT \
      --num_processes=N --process_id=I     # one process per host (or SLURM)

The same command on an existing workdir resumes from its latest checkpoint.
Outputs in the workdir: config.json, metrics.jsonl, tensorboard/,
rollouts/step_N.jsonl.gz, checkpoints/<step>/, plots/*.png. The embedded
default makes its warm start first if config.sft.dir has none
(launch/sft.py makes it on its own).
"""

import json

from absl import flags

from leap_jax import cli

_CONFIG = cli.define_config(
    "train", "Run config: configs/leap.py[:variant]; override fields with "
    "--config.FIELD=VALUE.")
_WORKDIR = flags.DEFINE_string("workdir", None,
                               "Run directory (default: config.workdir).")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None,
    "Multi-host: host:port of process 0 (default: read from SLURM / Open MPI "
    "when launched by one, else a single process).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None,
                                      "Multi-host: how many processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None,
                                   "Multi-host: this process's index.")


def main(argv):
  if len(argv) > 1:
    cli.fail("train", f"unexpected arguments: {argv[1:]}")
  cli.quiet_logging()
  from leap_jax import distributed  # pylint: disable=g-import-not-at-top
  config = _CONFIG.value
  try:
    distributed.restrict_training_devices(config)
    distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value,
                           _PROCESS_ID.value)
  except (ValueError, RuntimeError) as e:
    cli.fail("train", f"jax.distributed: {e}")
  from leap_jax import run_log, trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  from leap_jax.checkpoints import CheckpointError  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart.store import WarmStartError  # pylint: disable=g-import-not-at-top
  defaults = cli.config_defaults()
  for c in (config, defaults):
    cli.absolute_paths(c)
  workdir = _WORKDIR.value or config.workdir
  with cli.user_errors("train", ValueError, TypeError, FileNotFoundError,
                       WarmStartError, CheckpointError):
    trainer = trainer_lib.Trainer(config, workdir, defaults=defaults)
  try:
    summary = trainer.run()
  finally:
    trainer.close()
  import jax  # pylint: disable=g-import-not-at-top
  if jax.process_index() != 0:
    return
  if "acc@1_first_quarter" in summary:
    print(f"Acc@1 on the training prompts: first quarter "
          f"{summary['acc@1_first_quarter']:.3f}, last quarter "
          f"{summary['acc@1_last_quarter']:.3f}")
  print(json.dumps(run_log.json_safe(summary)))


if __name__ == "__main__":
  cli.run(main, "train")

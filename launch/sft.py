"""Makes the embedded policy's warm start (tokenizer + supervised fine-tune).

  python launch/sft.py --config=configs/leap.py [--force]

Writes config.sft.dir; train.py makes the same thing on first use when the
directory has none. --force remakes it.
"""

import functools
import json
import os
import shutil

from absl import flags

from leap_jax import cli

_CONFIG = cli.define_config(
    "sft", "Run config (its model, sft and env blocks).")
_FORCE = flags.DEFINE_bool("force", False, "Remake an existing warm start.")


def main(argv):
  if len(argv) > 1:
    cli.fail("sft", f"unexpected arguments: {argv[1:]}")
  cli.quiet_logging()
  from leap_jax import task_stream, trainer  # pylint: disable=g-import-not-at-top
  from leap_jax.warmstart import store  # pylint: disable=g-import-not-at-top
  config = _CONFIG.value
  cli.absolute_paths(config)
  if config.model.source != "embedded":
    cli.fail("sft", f"the {config.model.source!r} variant starts from its "
             "checkpoint; only the embedded policy has a warm start")
  if _FORCE.value and os.path.exists(config.sft.dir):
    shutil.rmtree(config.sft.dir)
  with cli.user_errors("sft", ValueError, store.WarmStartError):
    store.ensure(config.sft.dir, config,
                 task_stream.training_tasks(config.train_tasks),
                 functools.partial(trainer.make_env, config))
  print(json.dumps({"dir": config.sft.dir, **store.read_info(config.sft.dir)}))


if __name__ == "__main__":
  cli.run(main, "sft")

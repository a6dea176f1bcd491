"""Evaluates candidate kernels for one task; one JSON verdict per line on stdout.

  python launch/check_kernel.py --task=level1/matmul --candidate=answer.md
  python launch/check_kernel.py --list
"""

import json

from absl import flags

from leap_jax import cli

_CONFIG = cli.define_config(
    "check_kernel", "Run config; its `env` block sets up the environment.")
_TASK = flags.DEFINE_string("task", None, "Task id, e.g. level1/matmul.")
_CANDIDATES = flags.DEFINE_multi_string(
    "candidate", [], "File with a model answer (prose + ```python block, or "
    "plain Python). Repeat for several.")
_TIMEOUT = flags.DEFINE_float("timeout_s", None,
                              "Per-candidate deadline in seconds.")
_TIMING = flags.DEFINE_bool("timing", False,
                            "Time correct candidates against the reference.")
_LIST = flags.DEFINE_bool("list", False, "Print the task ids and exit.")


def _fail(message: str) -> None:
  cli.fail("check_kernel", message)


def main(argv):
  if len(argv) > 1:
    _fail(f"unexpected arguments: {argv[1:]}")
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  if _LIST.value:
    print("\n".join(kernels_pallas.task_ids()))
    return
  if not _TASK.value:
    _fail("--task is required (see --list)")
  if _TASK.value not in kernels_pallas.task_ids():
    _fail(f"unknown task {_TASK.value!r} (see --list)")
  if not _CANDIDATES.value:
    _fail("give at least one --candidate=FILE")
  answers = []
  for path in _CANDIDATES.value:
    try:
      with open(path, encoding="utf-8", errors="replace") as f:
        answers.append(f.read())
    except OSError as e:
      _fail(f"cannot read candidate {path!r}: {e.strerror}")

  from leap_jax.env import environment, settings  # pylint: disable=g-import-not-at-top
  env_cfg = _CONFIG.value.env
  if _TIMEOUT.value is not None:
    env_cfg.deadline_s = _TIMEOUT.value
  try:
    env_config = settings.env_config_from(env_cfg)
  except ValueError as e:
    _fail(str(e))
  with environment.KernelEnv(env_config) as env:
    verdicts = env.evaluate([(_TASK.value, a) for a in answers],
                            timing_on=_TIMING.value)
  for verdict in verdicts:
    print(json.dumps(verdict.to_json()), flush=True)


if __name__ == "__main__":
  cli.run(main, "check_kernel")

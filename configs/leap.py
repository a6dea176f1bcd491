"""LEAP training and evaluation config (big_vision style: `configs/leap.py:variant`).

Read with `config_flags.DEFINE_config_file`; override any field on the command
line, e.g. `--config.env.num_workers=4`. Unknown fields are errors.
"""

import ml_collections

VARIANTS = ("",)


def env_config() -> ml_collections.ConfigDict:
  """The kernel environment's knobs (leap_jax/env)."""
  env = ml_collections.ConfigDict()
  env.num_workers = 0            # 0: one per CPU core (CPU) or per verify device (GPU)
  env.start_method = "forkserver"  # forkserver (jax preloaded) | spawn
  env.backend = "auto"           # auto | interpret | triton | mosaic
  env.verify_devices = ""        # GPU hosts: comma-separated device ids for workers
  env.deadline_s = 60.0          # per candidate: exec, trace, lower, trials
  env.timing_deadline_s = 60.0
  env.startup_deadline_s = 120.0
  env.memory_gb = 8.0            # address-space cap per worker
  env.cpu_seconds = 300          # RLIMIT_CPU per worker
  env.trials = 3                 # fresh random input sets per candidate
  env.check_lowering = True      # CPU hosts: lower for the GPU Triton backend
  env.timing = False             # time correct candidates against the reference
  env.timing_rounds = 20
  env.timing_max_seconds = 20.0
  env.calibration_tasks = ("level1/vector_add", "level1/relu")
  env.calibration_repeats = 4
  env.band_floor = 0.02
  return env


def get_config(variant: str = "") -> ml_collections.ConfigDict:
  if variant not in VARIANTS:
    raise ValueError(f"unknown variant {variant!r} of configs/leap.py; "
                     f"known: {[v or '(default)' for v in VARIANTS]}")
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.env = env_config()
  config.lock()
  return config

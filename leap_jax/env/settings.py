"""EnvConfig from the `env` block of a run config (configs/leap.py)."""

from __future__ import annotations

import os

import ml_collections

from leap_jax.env import jail as jail_lib
from leap_jax.env import pool as pool_lib
from leap_jax.env import timing as timing_lib
from leap_jax.env import worker as worker_lib
from leap_jax.env.environment import EnvConfig

BACKENDS = ("auto", "interpret", "triton", "mosaic")


def resolve_backend(name: str, has_gpu: bool) -> str:
  """The concrete backend; a GPU backend on a host without one is an error."""
  if name not in BACKENDS:
    raise ValueError(f"env.backend must be one of {BACKENDS}, got {name!r}")
  if name == "auto":
    return "triton" if has_gpu else "interpret"
  if name != "interpret" and not has_gpu:
    raise ValueError(f"env.backend={name!r} needs a GPU host; this host has "
                     "none (use 'auto' or 'interpret')")
  return name


def physical_devices(devices: list[str], visible: str | None) -> list[str]:
  """env.verify_devices are ids among the GPUs this job may use (as jax
  numbers them); a worker sets CUDA_VISIBLE_DEVICES itself, from a clean
  environment, so it gets the id the job's own CUDA_VISIBLE_DEVICES (SLURM,
  Kubernetes) gives that GPU."""
  allowed = [d.strip() for d in (visible or "").split(",") if d.strip()]
  if not allowed:
    return devices
  try:
    return [allowed[int(d)] for d in devices]
  except (ValueError, IndexError):
    raise ValueError(f"env.verify_devices={','.join(devices)} are not ids among "
                     f"this job's CUDA_VISIBLE_DEVICES={visible}") from None


def _host_has_gpu() -> bool:
  import jax  # pylint: disable=g-import-not-at-top
  return any(d.platform == "gpu" for d in jax.devices())


def env_config_from(cfg: ml_collections.ConfigDict,
                    has_gpu: bool | None = None,
                    jobs_per_worker: int = 1,
                    input_seed: int | None = None) -> EnvConfig:
  """Builds the environment's config from the `env` config block.

  jobs_per_worker > 1 reuses a worker process for that many candidates: only
  for trusted code (the warm start's own mutated solutions), never for the
  policy's answers. input_seed: EnvConfig.input_seed (warm-start builds;
  evaluations fix theirs with KernelEnv.fixed_inputs).
  """
  has_gpu = _host_has_gpu() if has_gpu is None else has_gpu
  backend = resolve_backend(cfg.backend, has_gpu)
  devices = [d.strip() for d in str(cfg.verify_devices).split(",") if d.strip()]
  per_device = cfg.workers_per_device
  if per_device < 1:
    raise ValueError(f"env.workers_per_device must be >= 1, got {per_device}")
  if backend == "interpret":
    n = cfg.num_workers or os.cpu_count() or 1
    setups = tuple(worker_lib.WorkerSetup(backend=backend,
                                          check_lowering=cfg.check_lowering,
                                          jobs_per_worker=jobs_per_worker)
                   for _ in range(n))
  else:
    # Slots go round the devices: with workers_per_device > 1 several
    # workers check candidates on one GPU; timing still has it alone.
    devices = physical_devices(devices or ["0"],
                               os.environ.get("CUDA_VISIBLE_DEVICES"))
    n = cfg.num_workers or len(devices) * per_device
    setups = tuple(worker_lib.WorkerSetup(backend=backend,
                                          visible_device=devices[i % len(devices)],
                                          check_lowering=False,
                                          jobs_per_worker=jobs_per_worker)
                   for i in range(n))
  pool = pool_lib.PoolConfig(
      num_workers=n, start_method=cfg.start_method, deadline_s=cfg.deadline_s,
      timing_deadline_s=cfg.timing_deadline_s,
      startup_deadline_s=cfg.startup_deadline_s, setups=setups,
      jail=jail_lib.JailConfig(enabled=cfg.os_jail))
  return EnvConfig(
      pool=pool, trials=cfg.trials, check_lowering=cfg.check_lowering,
      timing=cfg.timing,
      timing_config=timing_lib.TimingConfig(
          rounds=cfg.timing_rounds, max_seconds=cfg.timing_max_seconds),
      calibration_tasks=tuple(cfg.calibration_tasks),
      calibration_repeats=cfg.calibration_repeats, band_floor=cfg.band_floor,
      memory_bytes=int(cfg.memory_gb * (1 << 30)), cpu_seconds=cfg.cpu_seconds,
      input_seed=input_seed)

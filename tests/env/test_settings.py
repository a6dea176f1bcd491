import pytest

from configs import leap
from leap_jax.env import settings


@pytest.fixture(autouse=True)
def _no_job_visible_devices(monkeypatch):
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_cpu_host_gets_interpret_workers_one_per_core():
  cfg = leap.get_config().env
  env_config = settings.env_config_from(cfg, has_gpu=False)
  assert env_config.backend == "interpret"
  assert all(s.backend == "interpret" for s in env_config.pool.setups)
  assert env_config.memory_bytes == 8 << 30 and env_config.trials == 3


def test_gpu_host_gets_one_worker_per_verify_device():
  cfg = leap.get_config().env
  cfg.verify_devices = "2,3"
  env_config = settings.env_config_from(cfg, has_gpu=True)
  assert env_config.backend == "triton"
  assert [s.visible_device for s in env_config.pool.setups] == ["2", "3"]
  assert not any(s.check_lowering for s in env_config.pool.setups)


@pytest.mark.parametrize("name,gpu,want", [
    ("auto", False, "interpret"), ("auto", True, "triton"),
    ("mosaic", True, "mosaic"), ("interpret", True, "interpret")])
def test_resolve_backend(name, gpu, want):
  assert settings.resolve_backend(name, gpu) == want


def test_bad_backends_are_clear_errors():
  with pytest.raises(ValueError, match="one of"):
    settings.resolve_backend("cuda", True)
  with pytest.raises(ValueError, match="needs a GPU"):
    settings.resolve_backend("triton", False)


def test_prompts_target_the_gpu_backend_even_in_interpret_mode():
  from configs import leap
  env = leap.get_config().env
  for backend, target in (("interpret", "triton"), ("triton", "triton"),
                          ("mosaic", "mosaic")):
    env.backend = backend
    assert settings.env_config_from(env, has_gpu=True).target_backend == target


def test_workers_per_device_puts_several_workers_on_each_gpu():
  cfg = leap.get_config().env
  cfg.verify_devices, cfg.workers_per_device = "2,3", 2
  env_config = settings.env_config_from(cfg, has_gpu=True)
  assert [s.visible_device for s in env_config.pool.setups] == ["2", "3", "2", "3"]
  devices = [settings.pool_lib.slot_device(s, i)
             for i, s in enumerate(env_config.pool.setups)]
  assert devices == ["2", "3", "2", "3"]  # slots on one GPU share its gate


def test_cpu_slots_are_each_their_own_device_and_bad_counts_are_errors():
  cfg = leap.get_config().env
  cfg.num_workers = 3
  setups = settings.env_config_from(cfg, has_gpu=False).pool.setups
  assert len({settings.pool_lib.slot_device(s, i)
              for i, s in enumerate(setups)}) == 3
  cfg.workers_per_device = 0
  with pytest.raises(ValueError, match="workers_per_device must be >= 1"):
    settings.env_config_from(cfg, has_gpu=True)


def test_the_os_layer_and_start_method_come_from_the_config():
  cfg = leap.get_config().env
  pool = settings.env_config_from(cfg, has_gpu=False).pool
  assert pool.start_method == "zygote" and pool.jail.enabled
  cfg.os_jail = False
  assert not settings.env_config_from(cfg, has_gpu=False).pool.jail.enabled


def test_verify_devices_go_through_the_jobs_own_visible_devices(monkeypatch):
  assert settings.physical_devices(["2", "3"], "4,5,6,7") == ["6", "7"]
  assert settings.physical_devices(["1"], None) == ["1"]
  with pytest.raises(ValueError, match="not ids among this job's"):
    settings.physical_devices(["4"], "4,5")
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
  cfg = leap.get_config().env
  cfg.verify_devices = "0,3"
  setups = settings.env_config_from(cfg, has_gpu=True).pool.setups
  assert [s.visible_device for s in setups] == ["4", "7"]


def test_input_seed_is_fresh_unless_a_build_fixes_it():
  cfg = leap.get_config("").env
  assert settings.env_config_from(cfg, has_gpu=False).input_seed is None
  assert settings.env_config_from(cfg, has_gpu=False,
                                  input_seed=3).input_seed == 3

"""benchmarks/gpu_check.py: the no-GPU exit (status 2, one line) and its pure
helpers on hand-made results. The GPU phases themselves run only on a GPU host."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks import scripts

ROOT = scripts.ROOT
SCRIPT = scripts.path("gpu_check")

gc = scripts.load("gpu_check")


def _run(env_update, *args):
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  env.update(env_update)
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True,
                        text=True, timeout=120, env=env, cwd=ROOT)


def _assert_one_line_no_gpu(out):
  assert out.returncode == 2, (out.stdout, out.stderr)
  assert out.stdout == ""
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1, out.stderr
  assert lines[0].startswith("gpu_check: no GPU backend: ")
  assert "requirements-gpu.txt" in lines[0]
  assert "Traceback" not in out.stderr


def test_cpu_only_host_exits_2_with_one_line(tmp_path):
  path = tmp_path / "gpu_check.json"
  out = _run({"JAX_PLATFORMS": "cpu"}, f"--json_out={path}")
  _assert_one_line_no_gpu(out)
  assert "sees only ['cpu'] devices (JAX_PLATFORMS=cpu)" in out.stderr
  saved = json.loads(path.read_text())
  assert saved["error"] == out.stderr.strip()
  assert saved["probe"]["devices"][0]["platform"] == "cpu"


def _has_cuda_plugin():
  names = {(d.metadata["Name"] or "").lower().replace("_", "-")
           for d in importlib.metadata.distributions()}
  return any(n.startswith("jax-cuda") for n in names)


@pytest.mark.skipif(_has_cuda_plugin(), reason="a CUDA plugin is installed")
def test_missing_plugin_exits_2_with_one_line():
  out = _run({})  # the probe asks for cuda: no silent CPU fallback
  _assert_one_line_no_gpu(out)
  assert "no jax-cuda plugin installed" in out.stderr


def test_resolve_tasks():
  ids = ["level1/abs", "level1/relu", "level2/softmax", "level10/x"]
  assert gc.resolve_tasks([], ids) == ids
  assert gc.resolve_tasks(["level1"], ids) == ["level1/abs", "level1/relu"]
  assert gc.resolve_tasks(["level2/", "level1/relu", "level1"], ids) == [
      "level2/softmax", "level1/relu", "level1/abs"]
  with pytest.raises(ValueError, match="'level3' names no task"):
    gc.resolve_tasks(["level3"], ids)


def test_no_gpu_reason():
  gpu = {"devices": [{"platform": "gpu"}], "plugins": ["jax-cuda12-plugin 0.10.2"]}
  assert gc.no_gpu_reason(gpu) is None
  cpu = {"devices": [{"platform": "cpu"}], "plugins": [], "jax_version": "0.10.2"}
  assert gc.no_gpu_reason(cpu, allow_cpu=True) is None
  assert gc.no_gpu_reason(cpu) == ("jax 0.10.2 sees only ['cpu'] devices; "
                                   "no jax-cuda plugin installed")
  broken = {"error": "jax.devices() failed: RuntimeError: CUDA_ERROR_NO_DEVICE",
            "plugins": ["jax-cuda12-plugin 0.10.2"], "jax_platforms": "cuda"}
  assert gc.no_gpu_reason(broken) == (
      "jax.devices() failed: RuntimeError: CUDA_ERROR_NO_DEVICE (JAX_PLATFORMS=cuda)")


def _result():
  rows = [
      {"task": "level1/relu", "status": "ok", "seconds": 3.1, "raw_speedup": 1.5,
       "speedup": 1.5, "ci": [1.2, 1.8]},
      {"task": "level1/abs", "status": "ok", "seconds": 2.0, "raw_speedup": 0.5,
       "speedup": 0.5, "ci": [0.4, 0.6]},
      {"task": "level1/exp", "status": "ok", "seconds": 2.5, "raw_speedup": 1.0,
       "speedup": 1.0, "ci": [0.9, 1.1]},
      {"task": "level2/softmax", "status": "runtime_error", "seconds": 4.0,
       "detail": "ValueError: bad block"},
  ]
  metrics = [
      {"step": 1, "seconds_step": 30.0, "seconds_rollout": 10.0,
       "seconds_env": 15.0, "seconds_update": 5.0, "acc@1": 0.5},
      {"step": 2, "seconds_step": 20.0, "seconds_rollout": 8.0,
       "seconds_env": 9.0, "seconds_update": 3.0, "acc@1": float("nan")},
  ]
  return {
      "probe": {"jax_version": "0.10.2", "jaxlib_version": "0.10.2",
                "plugins": ["jax-cuda12-plugin 0.10.2"],
                "devices": [{"id": 0, "platform": "gpu", "kind": "NVIDIA H200",
                             "memory_gb": 104.5}]},
      "kernels": {"total": 114, "rows": rows, "workers": 4, "backend": "triton",
                  "band": 0.05, "seconds": 230.0, "stopped_early": True},
      "training": gc.training_summary(metrics, seconds_setup=60.0),
      "sampler": {"layers": 30, "batch": 16, "new_tokens": 128,
                  "bf16_tokens_per_s": 2000.0, "f32_tokens_per_s": 1500.0},
      "errors": {"training": "timed out after 240 s"},
  }


def test_kernel_and_training_summaries():
  result = _result()
  k = gc.kernel_summary(result["kernels"])
  assert (k["done"], k["total"], k["ok"], k["failed"]) == (4, 114, 3, 1)
  assert k["statuses"] == {"ok": 3, "runtime_error": 1}
  assert k["median_speedup"] == 1.0
  assert (k["faster_ci"], k["slower_ci"]) == (1, 1)
  assert k["stopped_early"]
  t = result["training"]
  assert t["steps"] == 2 and t["seconds_per_step"] == 25.0
  assert (t["seconds_rollout"], t["seconds_env"], t["seconds_update"]) == (9.0, 12.0, 4.0)
  assert t["acc@1"] == 0.5  # the NaN step is left out of the mean
  assert [r["step"] for r in t["per_step"]] == [1, 2]


def test_summary_is_strict_json_and_table_has_every_section():
  result = _result()
  result["kernels"]["band"] = float("nan")  # strict JSON: NaN becomes null
  s = gc.summary(result)
  assert json.loads(json.dumps(s, allow_nan=False)) == s
  assert s["kernels"]["band"] is None
  result["kernels"]["band"] = 0.05
  assert s["ok"] is False and s["devices"] == ["NVIDIA H200 (gpu)"]
  assert s["jax_version"] == "0.10.2"
  assert s["kernels"]["done"] == 4 and s["kernels"]["median_speedup"] == 1.0
  assert s["training"]["steps"] == 2 and "per_step" not in s["training"]
  assert s["sampler"]["bf16_tokens_per_s"] == 2000.0
  assert s["sampler"]["f32_tokens_per_s"] == 1500.0
  table = gc.format_table(result)
  assert "-- kernels (triton, 4 workers, A/A band +-5.0%): 4/114 done in 230 s " \
         "(stopped at the budget); 3 ok, 1 failed; median speedup 1.000x" in table
  assert "level2/softmax  runtime_error" in table and "ValueError: bad block" in table
  assert "-- training: 2 steps, 25.0 s/step (rollout 9.0, env 12.0, update 4.0), " \
         "Acc@1 0.500" in table
  assert "bfloat16 2000 tokens/s, float32 1500 tokens/s" in table
  assert "-- training: ERROR timed out after 240 s" in table


def test_table_without_phases():
  table = gc.format_table({"probe": {}, "errors": {"sampler": "exit status 1"}})
  assert "-- sampler: ERROR exit status 1" in table
  assert "-- kernels" not in table and "-- training:" not in table

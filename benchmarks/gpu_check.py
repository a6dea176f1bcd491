"""One run on a GPU host: every kernel natively, a few training steps, sampler speed.

  python benchmarks/gpu_check.py [--json_out=FILE] [--tasks=level1,...]
      [--kernel_budget_s=240] [--train_steps=2] [--sft_steps=100]

Each phase runs in a child process of this script (`--phase=...`): it gets a
hard timeout, its own GPU memory (jax preallocates 75% per process), and its
failure leaves the other phases running. Order: preflight, sampler, training,
kernels; the kernel phase gets what is left of --deadline_s (at most
--kernel_budget_s) and reports how many tasks it did. No GPU: one line on
stderr, exit status 2. Otherwise a table; the last stdout line is one JSON
object; exit status 0 only if every phase ran.
"""

import collections
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from leap_jax import run_log  # noqa: E402  (plain Python: safe before the probe)

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(ROOT, "configs", "leap.py"),
    "Training config; its env block also serves the kernel phase. Override "
    "fields with --config.FIELD=VALUE.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Also write the full JSON here.")
_TASKS = flags.DEFINE_list("tasks", [], "Task ids or level prefixes (default: all).")
_KERNEL_BUDGET = flags.DEFINE_float("kernel_budget_s", 240, "Kernel phase seconds.")
_MAX_TASK = flags.DEFINE_float("max_task_seconds", 60, "Per-candidate deadline.")
_KERNEL_WORKERS = flags.DEFINE_integer("kernel_workers", 4,
                                       "Env workers (all on GPU 0) for kernels.")
_BACKEND = flags.DEFINE_string("backend", "triton", "env.backend (kernels, training).")
_TRAIN_STEPS = flags.DEFINE_integer("train_steps", 2, "RL steps.")
_SFT_STEPS = flags.DEFINE_integer("sft_steps", 100, "Warm-start SFT steps.")
_ENV_WORKERS = flags.DEFINE_integer("env_workers", 8, "Env workers for training.")
_S_LAYERS = flags.DEFINE_integer("sampler_layers", 30, "SmolLM2-135M: 30.")
_S_BATCH = flags.DEFINE_integer("sampler_batch", 16, "Samples of one prompt.")
_S_TOKENS = flags.DEFINE_integer("sampler_new_tokens", 128, "New tokens per sample.")
_S_PROMPT = flags.DEFINE_integer("sampler_prompt_tokens", 256, "Prompt length.")
_S_REPEATS = flags.DEFINE_integer("sampler_repeats", 3, "Timed calls (median).")
_DEADLINE = flags.DEFINE_float("deadline_s", 440, "Wall seconds for everything.")
_PROBE_TIMEOUT = flags.DEFINE_float("probe_timeout_s", 90, "Preflight timeout.")
_SAMPLER_TIMEOUT = flags.DEFINE_float("sampler_timeout_s", 180, "Sampler timeout.")
_TRAIN_TIMEOUT = flags.DEFINE_float("train_timeout_s", 240, "Training timeout.")
_ALLOW_CPU = flags.DEFINE_bool("allow_cpu", False,
                               "Development: run on CPU (with --backend=auto).")
_PHASE = flags.DEFINE_enum("phase", None, ["probe", "sampler", "training", "kernels"],
                           "Internal: run one phase in this process.")
_PHASE_OUT = flags.DEFINE_string("phase_out", None, "Internal: phase result file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Internal: training workdir.")

HINT = "install requirements-gpu.txt (jax[cuda12])"
PLUGIN_PREFIXES = ("jax-cuda", "jax-rocm", "jax-triton")


# -- pure helpers (unit-tested) ------------------------------------------------

def first_line(text, limit=300):
  lines = [s.strip() for s in str(text).splitlines() if s.strip()]
  return (lines[0] if lines else "")[:limit]


def resolve_tasks(spec, all_ids):
  """Ids for the --tasks items: exact ids or level prefixes ("level1")."""
  if not spec:
    return list(all_ids)
  out = []
  for item in (s.strip().rstrip("/") for s in spec):
    picked = [t for t in all_ids if t == item or t.startswith(item + "/")]
    if not picked:
      raise ValueError(f"--tasks: {item!r} names no task")
    out += [t for t in picked if t not in out]
  return out


def no_gpu_reason(probe, allow_cpu=False):
  """Why the preflight failed, or None when there is a GPU (or CPU is allowed)."""
  platforms = sorted({d["platform"] for d in probe.get("devices", [])})
  if probe.get("error"):
    reason = probe["error"]
  elif "gpu" in platforms or (allow_cpu and platforms):
    return None
  else:
    reason = f"jax {probe.get('jax_version', '?')} sees only {platforms} devices"
  if probe.get("jax_platforms"):
    reason += f" (JAX_PLATFORMS={probe['jax_platforms']})"
  if not any(p.startswith("jax-cuda") for p in probe.get("plugins", [])):
    reason += "; no jax-cuda plugin installed"
  return reason


def kernel_summary(k):
  """done / ok / failed / statuses / median speedups of a kernel phase result."""
  rows = k.get("rows", [])
  ok = [r for r in rows if r["status"] == "ok"]
  raw = [r["raw_speedup"] for r in ok if r.get("raw_speedup") is not None]
  statuses = collections.Counter(r["status"] for r in rows)
  return {"done": len(rows), "total": k.get("total"), "ok": len(ok),
          "failed": len(rows) - len(ok), "statuses": dict(sorted(statuses.items())),
          "median_speedup": statistics.median(raw) if raw else None,
          "faster_ci": sum(r["ci"][0] > 1 for r in ok if r.get("ci")),
          "slower_ci": sum(r["ci"][1] < 1 for r in ok if r.get("ci")),
          "band": k.get("band"), "seconds": k.get("seconds"),
          "stopped_early": k.get("stopped_early", False)}


def training_summary(metrics, seconds_setup=None, warmstart=None):
  """Mean seconds per step and per phase, Acc@1, from metrics.jsonl rows."""
  def mean(key):
    vals = [r[key] for r in metrics
            if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return statistics.fmean(vals) if vals else None
  keys = ("seconds_step", "seconds_rollout", "seconds_env", "seconds_update",
          "acc@1")
  return {"steps": len(metrics), "seconds_per_step": mean("seconds_step"),
          **{k: mean(k) for k in keys[1:]}, "seconds_setup": seconds_setup,
          "warmstart": warmstart,
          "per_step": [{k: r.get(k) for k in ("step",) + keys}
                       for r in metrics]}


def summary(result):
  """The last stdout line: everything but the per-task rows."""
  probe = result.get("probe", {})
  training = {k: v for k, v in result.get("training", {}).items() if k != "per_step"}
  return run_log.json_safe({
      "ok": not result.get("errors"),
      "devices": [f"{d['kind']} ({d['platform']})" for d in probe.get("devices", [])],
      "jax_version": probe.get("jax_version"),
      "jaxlib_version": probe.get("jaxlib_version"), "plugins": probe.get("plugins"),
      "kernels": kernel_summary(result["kernels"]) if "kernels" in result else None,
      "training": training or None, "sampler": result.get("sampler"),
      "errors": result.get("errors", {})})


def _num(x, fmt):
  return "-" if x is None else format(x, fmt)


def format_table(result):
  """The human-readable report: kernels / training / sampler sections."""
  s, lines = summary(result), []
  mem = [_num(d.get("memory_gb"), ".1f") for d in result.get("probe", {}).get("devices", [])]
  lines.append(f"gpu_check: jax {s['jax_version']} (jaxlib {s['jaxlib_version']}), "
               f"plugins {s['plugins']}, devices {s['devices']}, memory GB {mem}")
  k = result.get("kernels")
  if k is not None:
    ks = s["kernels"]
    lines.append(
        f"-- kernels ({k.get('backend')}, {k.get('workers')} workers, A/A band "
        f"+-{_num(ks['band'] and 100 * ks['band'], '.1f')}%): {ks['done']}/"
        f"{ks['total']} done in {_num(ks['seconds'], '.0f')} s"
        f"{' (stopped at the budget)' if ks['stopped_early'] else ''}; "
        f"{ks['ok']} ok, {ks['failed']} failed; median speedup "
        f"{_num(ks['median_speedup'], '.3f')}x ({ks['faster_ci']} faster, "
        f"{ks['slower_ci']} slower by their 95% CI)")
    if k.get("calibration_error"):
      lines.append(f"   A/A calibration failed, not timed: {k['calibration_error']}")
    width = max([len(r["task"]) for r in k.get("rows", [])] + [4]) + 2
    lines.append(f"{'task':<{width}}{'status':<24}{'speedup':>9}{'95% CI':>14}{'s':>7}")
    for r in k.get("rows", []):
      ci = f"{r['ci'][0]:.3f}-{r['ci'][1]:.3f}" if r.get("ci") else "-"
      lines.append(f"{r['task']:<{width}}{r['status']:<24}"
                   f"{_num(r.get('raw_speedup'), '.3f'):>9}{ci:>14}"
                   f"{_num(r.get('seconds'), '.1f'):>7}"
                   + (f"  {r['detail']}" if r.get("detail") else ""))
  t = s["training"]
  if t is not None:
    lines.append(
        f"-- training: {t['steps']} steps, {_num(t['seconds_per_step'], '.1f')} "
        f"s/step (rollout {_num(t['seconds_rollout'], '.1f')}, env "
        f"{_num(t['seconds_env'], '.1f')}, update {_num(t['seconds_update'], '.1f')}),"
        f" Acc@1 {_num(t['acc@1'], '.3f')}; setup incl. warm start "
        f"{_num(t.get('seconds_setup'), '.0f')} s")
  sm = s["sampler"]
  if sm is not None:
    lines.append(
        f"-- sampler: random SmolLM2-135M shape ({sm.get('layers')} layers), "
        f"{sm.get('batch')} x {sm.get('new_tokens')} new tokens: bfloat16 "
        f"{_num(sm.get('bf16_tokens_per_s'), '.0f')} tokens/s, float32 "
        f"{_num(sm.get('f32_tokens_per_s'), '.0f')} tokens/s")
  for phase, err in s["errors"].items():
    lines.append(f"-- {phase}: ERROR {err}")
  return "\n".join(lines)


# -- phases (each in its own child process) ------------------------------------

def phase_probe():
  """Versions, plugins, devices; errors as text (never raises)."""
  import importlib.metadata as md  # pylint: disable=g-import-not-at-top
  names = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version
           for d in md.distributions()}
  out = {"plugins": sorted(f"{n} {v}" for n, v in names.items()
                           if n.startswith(PLUGIN_PREFIXES)),
         "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}
  try:
    import jax  # pylint: disable=g-import-not-at-top
    import jaxlib  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    return dict(out, error=f"import jax failed: {type(e).__name__}: {first_line(e)}")
  out.update(jax_version=jax.__version__, jaxlib_version=jaxlib.__version__)
  try:
    devices = jax.devices()
  except Exception as e:  # pylint: disable=broad-except
    # jax raises a bare AssertionError when JAX_PLATFORMS names a missing plugin.
    return dict(out, error=f"jax.devices() failed: {type(e).__name__}"
                + (f": {first_line(e)}" if first_line(e) else ""))
  stats = [d.memory_stats() or {} if d.platform != "cpu" else {} for d in devices]
  out["devices"] = [{"id": d.id, "platform": d.platform, "kind": d.device_kind,
                     "memory_gb": m.get("bytes_limit") and round(m["bytes_limit"] / 2**30, 1)}
                    for d, m in zip(devices, stats)]
  return out


def phase_sampler():
  """Steady tokens/s of a random SmolLM2-135M-shaped model (as sampler.py's
  time_ours: a warm-up call, then the median of timed calls)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from leap_jax.model import config as mc, sampler, transformer  # pylint: disable=g-import-not-at-top
  g, n = _S_BATCH.value, _S_TOKENS.value
  out = {"layers": _S_LAYERS.value, "batch": g, "new_tokens": n,
         "prompt_tokens": _S_PROMPT.value}
  prompt = np.random.default_rng(0).integers(1, 49152, _S_PROMPT.value).tolist()
  for dtype, key in (("bfloat16", "bf16"), ("float32", "f32")):
    cfg = mc.ModelConfig(
        vocab_size=49152, embed_dim=576, num_layers=_S_LAYERS.value, num_heads=9,
        num_kv_heads=3, head_dim=64, mlp_dim=1536, rms_eps=1e-5,
        rope=mc.RopeConfig(theta=100000.0), max_position=8192,
        tie_embeddings=True, dtype=dtype)
    smp = sampler.Sampler(*transformer.init(cfg, seed=0), cfg)
    times = []
    for seed in range(_S_REPEATS.value + 1):  # seed 0: the warm-up (compiles)
      start = time.perf_counter()
      batch = smp.generate([prompt], num_samples=g, max_new_tokens=n,
                           temperature=1.0, stop_token_ids=[], rng=seed)
      times.append(time.perf_counter() - start)
      assert batch.tokens.shape == (g, n) and (batch.lengths == n).all()
    out[f"{key}_tokens_per_s"] = round(g * n / statistics.median(times[1:]), 1)
    out[f"{key}_warmup_s"] = round(times[0], 2)
    out[f"{key}_seconds"] = [round(t, 3) for t in times[1:]]
    print(f"sampler {dtype}: {out[f'{key}_tokens_per_s']} tokens/s", flush=True)
  return out


def _verdict_row(v):
  row = {"task": v.task_id, "status": v.status.value, "seconds": round(v.seconds, 2)}
  if v.status.value != "ok":
    row["detail"] = first_line(v.detail, 160)
  t = v.timing
  if t is not None:
    row.update(raw_speedup=t.raw_speedup, speedup=t.speedup, ci=[t.ci_low, t.ci_high],
               ref_ms=1e3 * t.ref_seconds, cand_ms=1e3 * t.cand_seconds)
  return row


def phase_kernels(write):
  """Every solution through KernelEnv with timing, in chunks, until the budget."""
  start = time.monotonic()
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # workers need memory
  import kernels_pallas  # pylint: disable=g-import-not-at-top
  from leap_jax.env import candidate, environment, settings  # pylint: disable=g-import-not-at-top
  ids = resolve_tasks(_TASKS.value, kernels_pallas.task_ids())
  cfg = _CONFIG.value.env
  cfg.update(backend=_BACKEND.value, num_workers=_KERNEL_WORKERS.value, timing=True,
             deadline_s=_MAX_TASK.value, timing_deadline_s=_MAX_TASK.value)
  budget = _KERNEL_BUDGET.value
  k = {"total": len(ids), "rows": [], "workers": _KERNEL_WORKERS.value}
  with environment.KernelEnv(settings.env_config_from(cfg)) as env:
    k.update(backend=env.config.backend, interpret=env.interpret)
    timed = True
    try:
      k["band"] = env.calibrate()
    except RuntimeError as e:  # still worth the correctness verdicts
      k["calibration_error"], timed = first_line(e), False
    k["seconds_setup"] = time.monotonic() - start
    chunk, last = 2 * _KERNEL_WORKERS.value, 0.0
    for i in range(0, len(ids), chunk):
      if time.monotonic() - start + last > budget:
        k["stopped_early"] = True  # the next chunk would likely overrun
        break
      t = time.monotonic()
      answers = [(tid, candidate.fence(kernels_pallas.get_task(tid).solution_candidate_source))
                 for tid in ids[i:i + chunk]]
      k["rows"] += [_verdict_row(v) for v in env.evaluate(answers, timing_on=timed)]
      last = time.monotonic() - t
      k["seconds"] = time.monotonic() - start
      write(k)  # partial results survive a kill
      print(f"kernels: {len(k['rows'])}/{len(ids)} in {k['seconds']:.0f} s", flush=True)
  k["seconds"] = time.monotonic() - start
  return k


def phase_training(workdir):
  """--train_steps RL steps of the config (warm start first) in workdir."""
  from leap_jax import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  config = _CONFIG.value
  steps, sft_steps = _TRAIN_STEPS.value, _SFT_STEPS.value
  config.update(num_steps=steps, checkpoint_every=steps, workdir=workdir,
                eval_every=0)  # the training steps alone, as before
  config.sft.update(steps=sft_steps, dir=os.path.join(workdir, "warmstart"),
                    warmup_steps=min(config.sft.warmup_steps, max(1, sft_steps // 2)))
  config.env.update(backend=_BACKEND.value, num_workers=_ENV_WORKERS.value)
  start = time.monotonic()
  trainer = trainer_lib.Trainer(config, workdir)
  setup = time.monotonic() - start
  try:
    trainer.run()
  finally:
    trainer.close()
  return read_training(workdir, setup)


def read_training(workdir, setup=None):
  """training_summary from a workdir (also after the child was killed)."""
  warm = None
  info = os.path.join(workdir, "warmstart", "warmstart.json")
  if os.path.exists(info):
    with open(info) as f:
      w = json.load(f)
    warm = {k: w.get(k) for k in ("examples", "loss_first_quarter",
                                  "loss_last_quarter", "seconds_data",
                                  "seconds_sft", "seconds_total")}
  return training_summary(run_log.read_metrics(workdir), setup, warm)


def child_main():
  """One phase; its result (or partial result and error) to --phase_out."""
  partial = {}

  def write(obj):
    partial.update(obj)
    with open(_PHASE_OUT.value + ".tmp", "w") as f:
      json.dump(run_log.json_safe(partial), f)
    os.replace(_PHASE_OUT.value + ".tmp", _PHASE_OUT.value)
  phase = _PHASE.value
  if phase != "probe":  # the probe must not import the project (jax may be broken)
    from leap_jax.cli import quiet_logging  # pylint: disable=g-import-not-at-top
    quiet_logging()
  try:
    write(phase_probe() if phase == "probe" else
          phase_sampler() if phase == "sampler" else
          phase_training(_WORKDIR.value) if phase == "training" else
          phase_kernels(write))
  except Exception as e:  # pylint: disable=broad-except
    traceback.print_exc()
    write({"error": f"{type(e).__name__}: {first_line(e)}"})
    sys.exit(1)


# -- the parent ----------------------------------------------------------------

def run_phase(name, timeout, tmp, extra=(), quiet=False):
  """(result dict, error or None): this script with --phase=name, killed
  (its whole process group) after `timeout` seconds."""
  out, timeout = os.path.join(tmp, f"{name}.json"), max(1.0, timeout)
  cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:],
         f"--phase={name}", f"--phase_out={out}", *extra]
  env = dict(os.environ)
  if name == "probe" and not env.get("JAX_PLATFORMS") and not _ALLOW_CPU.value:
    env["JAX_PLATFORMS"] = "cuda"  # a missing plugin is an error, not a CPU fallback
  # Children's stdout goes to our stderr: our stdout is the table and the JSON.
  sink = subprocess.PIPE if quiet else sys.stderr
  proc = subprocess.Popen(cmd, stdout=sink, stderr=sink, env=env, text=True,
                          start_new_session=True)
  try:
    _, err_text = proc.communicate(timeout=timeout)
    rc = proc.returncode
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    _, err_text = proc.communicate()
    rc = None
  result = {}
  if os.path.exists(out):
    with open(out) as f:
      result = json.load(f)
  if rc is None:
    return result, f"timed out after {timeout:.0f} s"
  if rc != 0:
    tail = [s for s in (err_text or "").splitlines() if s.strip()]
    return result, result.get("error") or f"exit status {rc}" + (
        f": {tail[-1][:300]}" if tail else "")
  return result, None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _PHASE.value:
    return child_main()
  start = time.monotonic()
  left = lambda: _DEADLINE.value - (time.monotonic() - start)  # noqa: E731
  tmp = tempfile.mkdtemp(prefix="gpu_check_")
  try:
    probe, err = run_phase("probe", _PROBE_TIMEOUT.value, tmp, quiet=True)
    reason = f"device probe {err}" if err else no_gpu_reason(probe, _ALLOW_CPU.value)
    if reason:
      line = f"gpu_check: no GPU backend: {first_line(reason)}; {HINT}"
      print(line, file=sys.stderr, flush=True)
      if _JSON_OUT.value:
        with open(_JSON_OUT.value, "w") as f:
          json.dump({"error": line, "probe": probe}, f, indent=1)
      sys.exit(2)
    result = {"probe": probe, "errors": {}}
    print(f"gpu_check: devices {[d['kind'] for d in probe['devices']]}, jax "
          f"{probe['jax_version']}, plugins {probe['plugins']}", file=sys.stderr, flush=True)

    def record(name, got):
      res, error = got
      if res:
        result[name] = {k: v for k, v in res.items() if k != "error"}
      if error:
        result["errors"][name] = error
    record("sampler", run_phase("sampler", min(_SAMPLER_TIMEOUT.value, left() - 120), tmp))
    workdir = os.path.join(tmp, "train")
    res, error = run_phase("training", min(_TRAIN_TIMEOUT.value, left() - 90), tmp,
                           [f"--workdir={workdir}"])
    record("training", (res if "steps" in res else read_training(workdir), error))
    # Leave time for the last chunk to overrun the budget and the pool to close.
    budget = max(10.0, min(_KERNEL_BUDGET.value, left() - 45))
    record("kernels", run_phase("kernels", max(budget + 15, left() - 5), tmp,
                                [f"--kernel_budget_s={budget}"]))
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  print(format_table(result))
  if _JSON_OUT.value:
    with open(_JSON_OUT.value, "w") as f:
      json.dump(dict(summary(result), full=run_log.json_safe(result)), f, indent=1)
  print(json.dumps(summary(result)), flush=True)
  sys.exit(0 if not result["errors"] else 1)


if __name__ == "__main__":
  app.run(main)

"""The results page: runs the benchmarks, writes docs/results.md and its plots.

Each benchmark script in benchmarks/ runs as a subprocess; its last stdout
line (one JSON object) is kept in docs/results/<name>.json with the command,
date, machine and duration. The page is always rendered from those saved
files, so one measured run can be re-rendered (--from_saved) and a subset
can be rerun (--only) while the others keep their saved results. A script
that is missing or fails is named on the page; a failed rerun keeps the
previously saved result and says so.

  python benchmarks/results.py [--quick] [--only=leap_vs_full,env_throughput]
  python benchmarks/results.py --from_saved
"""

import dataclasses
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from leap_jax import plots  # noqa: E402  (sets the Agg backend)
from leap_jax.cli import fail  # noqa: E402

plt = plots.plt


@dataclasses.dataclass(frozen=True)
class Bench:
  name: str
  title: str
  quick_args: tuple[str, ...] = ()
  args: tuple[str, ...] = ()


BENCHMARKS = (
    Bench("leap_vs_full", "LEAP vs full multi-turn vs single-turn GRPO",
          ("--quick",)),
    Bench("env_throughput", "Environment throughput by worker start method",
          ("--batch=16", "--workers=1")),
    # 20 rounds of up to 20 s per measurement (the env default) would take
    # most of an hour here; 10 rounds of up to 5 s keep it to minutes.
    Bench("timing_noise", "Timing noise", ("--quick",),
          ("--repeats=5", "--config.env.timing_rounds=10",
           "--config.env.timing_max_seconds=5")),
    Bench("soak", "Environment soak under worker kills", ("--num=40",)),
    Bench("sampler", "Sampler throughput",
          ("--num_samples=4", "--max_new_tokens=16", "--repeats=1",
           "--skip_transformers")),
)
NAMES = tuple(b.name for b in BENCHMARKS)

_QUICK = flags.DEFINE_bool("quick", False,
                           "Small sizes (each benchmark's quick arguments).")
_ONLY = flags.DEFINE_list("only", [], f"Run only these: {', '.join(NAMES)}.")
flags.register_validator("only", lambda names: set(names) <= set(NAMES),
                         f"--only takes names from {', '.join(NAMES)}")
_FROM_SAVED = flags.DEFINE_bool(
    "from_saved", False, "Run nothing; render the page from the saved JSON.")
_DOCS = flags.DEFINE_string("docs", os.path.join(ROOT, "docs"),
                            "Where results.md and results/ go.")
_TIMEOUT = flags.DEFINE_integer("timeout_s", 3 * 3600,
                                "Per benchmark script.")
_SCRIPTS = flags.DEFINE_string("scripts", os.path.join(ROOT, "benchmarks"),
                               "Where the benchmark scripts are.")


# -- running and saving ------------------------------------------------------------


def saved_path(docs: str, name: str) -> str:
  return os.path.join(docs, "results", f"{name}.json")


def load_saved(docs: str, name: str) -> dict | None:
  path = saved_path(docs, name)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def last_json_line(stdout: str) -> dict:
  """The benchmark's result: its last non-empty stdout line, a JSON object."""
  lines = [l for l in stdout.splitlines() if l.strip()]
  if not lines:
    raise ValueError("printed nothing")
  result = json.loads(lines[-1])
  if not isinstance(result, dict):
    raise ValueError("last line is not a JSON object")
  return result


def run_bench(bench: Bench, quick: bool, timeout_s: int, scripts: str) -> dict:
  """Runs one script from the repository root; a record with `result`, or
  with `error` instead."""
  script = os.path.relpath(os.path.join(scripts, f"{bench.name}.py"), ROOT)
  args = bench.quick_args if quick else bench.args
  record = {"name": bench.name, "command": " ".join(["python", script, *args]),
            "quick": quick,
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
            "result": None, "error": None}
  if not os.path.exists(os.path.join(ROOT, script)):
    record["error"] = f"{script} is not there"
    return record
  start = time.monotonic()
  # Its own process group: on a timeout its children (train.py runs,
  # transformers timings) die too instead of skewing the next benchmark.
  child = subprocess.Popen([sys.executable, script, *args], cwd=ROOT,
                           text=True, stdout=subprocess.PIPE,
                           start_new_session=True)
  try:
    stdout, _ = child.communicate(timeout=timeout_s)
  except subprocess.TimeoutExpired:
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
    record["error"] = f"timed out after {timeout_s} s"
    return record
  record["seconds"] = round(time.monotonic() - start, 1)
  sys.stderr.write(stdout)  # its own table, for the console
  if child.returncode:  # its JSON, if any, still says what went wrong
    record["error"] = f"{script} exited {child.returncode}"
  try:
    record["result"] = last_json_line(stdout)
  except ValueError as e:  # json.JSONDecodeError is one
    record["error"] = record["error"] or f"{script}: {e}"
  return record


def save(docs: str, record: dict) -> None:
  """Writes the record; a run without a result keeps the previous one,
  marked."""
  previous = load_saved(docs, record["name"])
  if (record["result"] is None and previous
      and previous.get("result") is not None):
    record = dict(previous, error=f"latest run ({record['date']}) failed: "
                  f"{record['error']}; the result below is from {previous['date']}")
  os.makedirs(os.path.dirname(saved_path(docs, record["name"])), exist_ok=True)
  with open(saved_path(docs, record["name"]), "w") as f:
    json.dump(record, f, indent=1)


# -- rendering ------------------------------------------------------------------------


def cell(value) -> str:
  """A markdown table cell: dicts and lists compact, None as a dash."""
  if value is None:
    return "-"
  if isinstance(value, float):
    return f"{value:.4g}"
  if isinstance(value, dict):
    return ", ".join(f"{k}={cell(v)}" for k, v in value.items())
  if isinstance(value, list):
    return ", ".join(cell(v) for v in value)
  return str(value).replace("|", "\\|")


def md_table(rows: list[dict]) -> list[str]:
  """A markdown table; columns are the union of the rows' keys, in order."""
  headers = list(dict.fromkeys(k for r in rows for k in r))
  lines = ["| " + " | ".join(headers) + " |",
           "|" + "---|" * len(headers)]
  lines += ["| " + " | ".join(cell(r.get(h)) for h in headers) + " |"
            for r in rows]
  return lines


def scalars(obj: dict, prefix: str = "") -> dict:
  """Scalar leaves of nested dicts as dotted keys (lists are left out)."""
  out = {}
  for key, value in obj.items():
    if isinstance(value, dict):
      out.update(scalars(value, f"{prefix}{key}."))
    elif not isinstance(value, list):
      out[f"{prefix}{key}"] = value
  return out


def is_rows(value) -> bool:
  return (isinstance(value, list) and bool(value)
          and all(isinstance(v, dict) for v in value))


def render_generic(result: dict, name: str, docs: str) -> list[str]:
  """Any benchmark: its scalar figures, then each list of objects as a table."""
  del name, docs
  lines = md_table([{"figure": k, "value": v}
                    for k, v in scalars(result).items()])
  for key, value in result.items():
    if is_rows(value):
      lines += ["", f"`{key}`:", "", *md_table(value)]
  return lines


def plot_leap_vs_full(result: dict, path: str) -> None:
  """Smoothed Acc@T and Acc@1 against cumulative wall clock, per mode."""
  turns = result["turns"]
  keys = [f"acc@{turns}", "acc@1"] if turns > 1 else ["acc@1"]
  targets = {f"acc@{turns}": result.get("target"),
             "acc@1": (result.get("acc1") or {}).get("target")}
  fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4),
                           squeeze=False)
  for ax, key in zip(axes[0], keys):
    for mode, m in result["modes"].items():
      line, = ax.plot(m["curve"]["wall_s"], m["smooth"][key], marker=".",
                      label=mode)
      ax.plot(m["curve"]["wall_s"], m["curve"][key], linestyle="none",
              marker="x", alpha=0.35, color=line.get_color())
    if targets[key] is not None:
      ax.axhline(targets[key], color="gray", linestyle="--", linewidth=1,
                 label="target")
    ax.set(xlabel="wall clock (s, cumulative)", ylim=(-0.02, 1.02),
           ylabel=f"Acc@{key[4:]} (trailing mean of {result['window']})",
           title=f"Acc@{key[4:]} vs wall clock (x: single steps)")
    ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def render_leap_vs_full(result: dict, name: str, docs: str) -> list[str]:
  """Headline figures, the per-mode table, the plot and the caveat."""
  png = f"{name}.png"
  plot_leap_vs_full(result, os.path.join(docs, "results", png))
  turns, acc1 = result["turns"], result.get("acc1") or {}
  figures = {
      f"target Acc@{turns} (lower final of leap, full)": result.get("target"),
      "wallclock_ratio (full / leap, to that target)": result.get("wallclock_ratio"),
      f"acc_gap (full - leap, final Acc@{turns})": result.get("acc_gap"),
      "target Acc@1": acc1.get("target"),
      "wall clock ratio to Acc@1 target": acc1.get("wallclock_ratio"),
      "acc gap at Acc@1": acc1.get("acc_gap"),
      "eval acc gap (unpruned evaluation)": result.get("eval_acc_gap"),
      "config, steps per mode, seed": (f"{result.get('config')}, "
                                       f"{result.get('steps')}, {result.get('seed')}"),
      "warm start (s, not counted)": result.get("warmstart_s"),
      "train.py process (s)": result.get("process_s"),
  }
  lines = md_table([{"figure": k, "value": v} for k, v in figures.items()])
  lines += ["", *md_table(result["rows"]), "", f"![Acc vs wall clock](results/{png})"]
  if result.get("eval"):
    lines += ["", "Final checkpoints, unpruned evaluation on the training tasks:",
              "", *md_table([{"mode": m, **e} for m, e in result["eval"].items()])]
  lines += ["", f"Accuracy is a trailing mean over {result['window']} steps "
            "(from that step on; a lone step never reaches a target); wall "
            "clock is the cumulative measured seconds per step (first-step "
            f"compilation included). Training-rollout Acc@{turns} is not measured "
            "alike across modes: LEAP prunes turns that multiturn_full samples, "
            "and single-turn GRPO's Acc@t is its Acc@1. Acc@1 is alike in all "
            "modes; the unpruned evaluation (--eval_samples) compares final "
            "checkpoints on equal terms."]
  return lines


RENDERERS = {"leap_vs_full": render_leap_vs_full}


def render_section(bench: Bench, record: dict | None, docs: str) -> list[str]:
  lines = [f"## {bench.title}", ""]
  if record is None:
    return lines + [f"No saved result; run `python benchmarks/results.py "
                    f"--only={bench.name}`.", ""]
  if record.get("error"):
    lines += [f"**{record['error']}**", ""]
  if record.get("result") is None:
    return lines
  quick = " (--quick: small sizes)" if record.get("quick") else ""
  lines += [f"`{record['command']}`{quick}, {record['date']}, "
            f"{record.get('machine', '?')}, {record.get('seconds', '?')} s", ""]
  render = RENDERERS.get(bench.name, render_generic)
  return lines + render(record["result"], bench.name, docs) + [""]


def render_page(docs: str) -> str:
  """docs/results.md from the saved records (and the plots beside it)."""
  os.makedirs(os.path.join(docs, "results"), exist_ok=True)
  lines = ["# Benchmark results", "",
           "Regenerate everything: `python benchmarks/results.py` (`--quick` "
           "for small sizes, `--only=NAME,...` for some); re-render from the "
           "saved JSON in `docs/results/` without running: "
           "`python benchmarks/results.py --from_saved`.", ""]
  for bench in BENCHMARKS:
    lines += render_section(bench, load_saved(docs, bench.name), docs)
  path = os.path.join(docs, "results.md")
  with open(path, "w") as f:
    f.write("\n".join(lines).rstrip() + "\n")
  return path


def main(argv):
  if len(argv) > 1:
    fail("results", f"unexpected arguments: {argv[1:]}")
  docs = os.path.abspath(_DOCS.value)
  if not _FROM_SAVED.value:
    for bench in BENCHMARKS:
      if not _ONLY.value or bench.name in _ONLY.value:
        record = run_bench(bench, _QUICK.value, _TIMEOUT.value,
                           _SCRIPTS.value)
        print(f"{bench.name}: {record['error'] or 'ok'}", flush=True)
        save(docs, record)
  print(render_page(docs))


if __name__ == "__main__":
  app.run(main)

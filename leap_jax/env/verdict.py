"""Verdict statuses, the verdict record and the feedback text shown to the model."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import textwrap
from typing import Any


class Status(str, enum.Enum):
  """Outcome of one candidate, in pipeline order (design.md section 5)."""
  NO_CODE = "no_code"
  SYNTAX_ERROR = "syntax_error"
  MISSING_ENTRY_POINT = "missing_entry_point"
  FORBIDDEN = "forbidden"
  NO_KERNEL = "no_kernel"
  COMPUTE_OUTSIDE_KERNEL = "compute_outside_kernel"
  LOWERING_ERROR = "lowering_error"
  RUNTIME_ERROR = "runtime_error"
  TIMEOUT = "timeout"
  CRASHED = "crashed"
  WRONG_OUTPUT = "wrong_output"
  OK = "ok"
  HARNESS_ERROR = "harness_error"  # ours: never charged to the model


@dataclasses.dataclass(frozen=True)
class Timing:
  """Speedup of a candidate over the jnp reference (t_ref / t_cand)."""
  speedup: float          # 1.0 when inside the noise band
  raw_speedup: float      # median over rounds, before the band
  ci_low: float
  ci_high: float
  band: float             # calibrated |log ratio| noise band
  rounds: int
  ref_seconds: float      # median seconds per reference call
  cand_seconds: float     # median seconds per candidate call
  interpret: bool         # CPU host: timings measure the Pallas interpreter

  @property
  def significant(self) -> bool:
    return self.speedup != 1.0


@dataclasses.dataclass(frozen=True)
class Verdict:
  """What the environment says about one candidate."""
  task_id: str
  status: Status
  detail: str = ""           # error tail or mismatch summary; scrubbed here
  seconds: float = 0.0       # wall time spent on this candidate
  timing: Timing | None = None
  errors: dict[str, float] | None = None  # max_abs, max_rel, mismatch_share

  def __post_init__(self):
    # The one scrub-and-cap point: every detail, whoever wrote it (a worker
    # running untrusted code, the screen, the judge), is scrubbed here.
    object.__setattr__(self, "detail", scrub(self.detail))

  @property
  def correct(self) -> bool:
    return self.status is Status.OK

  @property
  def speedup(self) -> float | None:
    return self.timing.speedup if self.timing else None

  @property
  def feedback(self) -> str:
    return feedback_text(self)

  def to_json(self) -> dict[str, Any]:
    out = {"task": self.task_id, "status": self.status.value,
           "correct": self.correct, "speedup": self.speedup,
           "feedback": self.feedback, "seconds": round(self.seconds, 4)}
    if self.timing:
      out["timing"] = dataclasses.asdict(self.timing)
    if self.errors:
      out["errors"] = self.errors
    return out


_HEADLINES = {
    Status.NO_CODE: "No code found: answer with one ```python block that "
                    "defines kernel(*inputs).",
    Status.SYNTAX_ERROR: "The code does not parse.",
    Status.MISSING_ENTRY_POINT: "No function `kernel` is defined at module "
                                "level.",
    Status.FORBIDDEN: "The code uses something outside the allowed set.",
    Status.NO_KERNEL: "The traced program has no pallas_call: the "
                      "computation must run inside Pallas kernels.",
    Status.COMPUTE_OUTSIDE_KERNEL: "Computation happens outside the Pallas "
                                   "kernels; only data movement and dtype "
                                   "casts may stay outside.",
    Status.LOWERING_ERROR: "The kernel does not lower for the GPU backend.",
    Status.RUNTIME_ERROR: "The kernel raised an error.",
    Status.TIMEOUT: "The kernel ran past its time limit.",
    Status.CRASHED: "The process running the kernel died.",
    Status.WRONG_OUTPUT: "The output does not match the reference.",
    Status.OK: "Correct.",
    Status.HARNESS_ERROR: "The environment failed; this is not your fault.",
}

# Sized so that a whole feedback (headline, errors, detail) fits the
# prompt's default 1500-character feedback cap (rl/prompts.py).
MAX_DETAIL_LINES = 12
MAX_DETAIL_CHARS = 1200
_SCAN_CHARS = 1 << 16         # only the tail of a longer text is looked at
MIN_SECRET_CHARS = 8          # shorter environment values are not redacted
REDACTED = "[env]"
_LINE_BREAK_RE = re.compile(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
# An absolute (or ~) path of two or more components: its last one is kept.
_PATH_CHAR = r"[^\s/'\"`()<>\[\]{},;:=|]"
_PATH_RE = re.compile(rf"(?<![\w.~/])~?(?:/{_PATH_CHAR}+)+/({_PATH_CHAR}+)")


def _redact_environment(text: str) -> str:
  # Longest first, so a value containing another is redacted whole.
  values = sorted({v for v in os.environ.values() if len(v) >= MIN_SECRET_CHARS},
                  key=len, reverse=True)
  for value in values:
    text = text.replace(value, REDACTED)
  return text


def scrub(text: str) -> str:
  """An error text as feedback may show it: its last lines, no host paths,
  no value of this process's environment, no control characters, at most
  MAX_DETAIL_LINES lines and MAX_DETAIL_CHARS characters. Idempotent."""
  text = str(text)[-_SCAN_CHARS:]
  text = _CONTROL_RE.sub("", _LINE_BREAK_RE.sub("\n", text)).expandtabs(2)
  text = _redact_environment(_PATH_RE.sub(r"\1", text))
  lines = [ln.rstrip() for ln in text.split("\n") if ln.strip()]
  text = "\n".join(lines[-MAX_DETAIL_LINES:])
  if len(text) > MAX_DETAIL_CHARS:
    text = "..." + text[-(MAX_DETAIL_CHARS - 3):]
  return text


def _timing_line(timing: Timing) -> str:
  where = "Pallas interpret mode on CPU" if timing.interpret else "GPU"
  if timing.significant:
    verdict = f"speedup {timing.speedup:.2f}x over the jnp reference"
  else:
    verdict = (f"no significant speedup (measured {timing.raw_speedup:.2f}x, "
               f"inside the noise band)")
  return (f"{verdict} [95% CI {timing.ci_low:.2f}-{timing.ci_high:.2f}, "
          f"noise band +-{100 * timing.band:.1f}%, {timing.rounds} rounds, "
          f"timed in {where}].")


def feedback_text(verdict: Verdict) -> str:
  """Deterministic feedback for the next turn."""
  parts = [f"Status: {verdict.status.value}. {_HEADLINES[verdict.status]}"]
  if verdict.errors:
    e = verdict.errors
    parts.append(f"Max abs error {e['max_abs']:.3g}, max rel error "
                 f"{e['max_rel']:.3g}, mismatched elements "
                 f"{100 * e['mismatch_share']:.2f}%.")
  if verdict.detail:
    # Indented: the harness's own lines start at column 0, so a detail line
    # ("Status: ok. Correct.") cannot pass for one of them.
    parts.append(textwrap.indent(verdict.detail, "  "))
  if verdict.timing:
    parts.append(_timing_line(verdict.timing))
  return "\n".join(parts)

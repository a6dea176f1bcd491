"""Candidate outputs against reference outputs: structure, dtype, NaN, values."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from leap_jax.env.verdict import Status


@dataclasses.dataclass(frozen=True)
class Comparison:
  status: Status                 # OK or WRONG_OUTPUT
  detail: str = ""
  errors: dict[str, float] | None = None


def _wrong(detail: str, errors=None) -> Comparison:
  return Comparison(Status.WRONG_OUTPUT, detail, errors)


def compare_structure(got_treedef: str, got_leaves: Sequence[tuple],
                      want_treedef: str, want_leaves: Sequence[tuple]
                      ) -> Comparison | None:
  """A WRONG_OUTPUT comparison if structure, shapes or dtypes differ."""
  if got_treedef != want_treedef:
    return _wrong(f"Output structure {got_treedef} != expected {want_treedef}.")
  for i, (got, want) in enumerate(zip(got_leaves, want_leaves)):
    if tuple(got[0]) != tuple(want[0]):
      return _wrong(f"Output {i}: shape {tuple(got[0])} != expected "
                    f"{tuple(want[0])}.")
    if got[1] != want[1]:
      return _wrong(f"Output {i}: dtype {got[1]} != expected {want[1]}.")
  return None


def compare_values(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                   atol: float, rtol: float) -> Comparison:
  """allclose over every output; NaN or inf in the candidate never passes."""
  max_abs = max_rel = 0.0
  mismatched = total = 0
  nan_outputs = []
  for i, (g, w) in enumerate(zip(got, want, strict=True)):
    g64 = np.asarray(g, np.float64)
    w64 = np.asarray(w, np.float64)
    if not np.all(np.isfinite(g64[np.isfinite(w64)])):
      nan_outputs.append(i)
    diff = np.abs(g64 - w64)
    diff = np.where(np.isnan(diff), np.inf, diff)
    bad = diff > atol + rtol * np.abs(w64)
    mismatched += int(bad.sum())
    total += bad.size
    if diff.size:
      max_abs = max(max_abs, float(diff.max()))
      max_rel = max(max_rel, float((diff / np.maximum(np.abs(w64), 1e-12)).max()))
  errors = {"max_abs": max_abs, "max_rel": max_rel,
            "mismatch_share": mismatched / max(total, 1)}
  if nan_outputs:
    return _wrong(f"NaN or inf in output(s) {nan_outputs}.", errors)
  if mismatched:
    return _wrong(f"Tolerances: atol={atol:g}, rtol={rtol:g}.", errors)
  return Comparison(Status.OK, "", errors)

"""Candidate outputs against reference outputs: structure, dtype, NaN, values.

Everything here reads what a worker sent; it is checked against the
reference before any arithmetic, so a malformed message is a verdict, never
an exception.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from leap_jax.env import mismatch
from leap_jax.env.verdict import Status


@dataclasses.dataclass(frozen=True)
class Comparison:
  status: Status   # OK or WRONG_OUTPUT (HARNESS_ERROR: judging itself failed)
  detail: str = ""
  errors: dict[str, float] | None = None


def _wrong(detail: str, errors=None) -> Comparison:
  return Comparison(Status.WRONG_OUTPUT, detail, errors)


def _leaf_spec(leaf: Any) -> tuple[tuple[int, ...], str] | None:
  """(shape, dtype name) of a header leaf, or None if it is not one."""
  if not isinstance(leaf, list | tuple) or len(leaf) != 2:
    return None
  shape, dtype = leaf
  if not isinstance(shape, list | tuple) or not isinstance(dtype, str):
    return None
  if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
    return None
  return tuple(shape), dtype


def compare_structure(got_treedef: Any, got_leaves: Any,
                      want_treedef: str, want_leaves: Sequence[tuple]
                      ) -> Comparison | None:
  """A WRONG_OUTPUT comparison if structure, shapes or dtypes differ.

  `got_*` come from a worker's header and may be anything.
  """
  if not isinstance(got_treedef, str) or got_treedef != want_treedef:
    return _wrong(f"Output structure {str(got_treedef)[:200]} != expected "
                  f"{want_treedef}.")
  if not isinstance(got_leaves, list | tuple) or len(got_leaves) != len(
      want_leaves):
    return _wrong(f"Expected {len(want_leaves)} outputs.")
  for i, (got, want) in enumerate(zip(got_leaves, want_leaves)):
    spec = _leaf_spec(got)
    if spec is None:
      return _wrong(f"Output {i}: malformed description.")
    if spec[0] != tuple(want[0]):
      return _wrong(f"Output {i}: shape {spec[0]} != expected "
                    f"{tuple(want[0])}.")
    if spec[1] != want[1]:
      return _wrong(f"Output {i}: dtype {spec[1]} != expected {want[1]}.")
  return None


def check_arrays(got: Sequence[np.ndarray], want: Sequence[np.ndarray]
                 ) -> Comparison | None:
  """A WRONG_OUTPUT comparison unless every array has the reference's count,
  shape, dtype and byte size (what a worker claims is not trusted)."""
  if len(got) != len(want):
    return _wrong(f"Sent {len(got)} arrays, expected {len(want)}.")
  for i, (g, w) in enumerate(zip(got, want)):
    if not isinstance(g, np.ndarray):
      return _wrong(f"Array {i} is not an array.")
    if g.shape != w.shape or g.dtype != w.dtype or g.nbytes != w.nbytes:
      return _wrong(f"Array {i}: {g.dtype.name}{list(g.shape)} != expected "
                    f"{w.dtype.name}{list(w.shape)}.")
  return None


def compare_values(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                   atol: float, rtol: float) -> Comparison:
  """allclose over every output, with the reference's non-finite values
  matched exactly: NaN or inf where the reference is finite never passes, an
  inf in the reference needs the same inf, a NaN needs a NaN."""
  max_abs = max_rel = 0.0
  mismatched = total = 0
  nan_outputs, inf_outputs = [], []
  described: list[str] = []  # the first wrong all-finite output, in words
  for i, (g, w) in enumerate(zip(got, want, strict=True)):
    g64 = np.asarray(g, np.float64)
    w64 = np.asarray(w, np.float64)
    finite = np.isfinite(w64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, 0 * inf
      diff = np.abs(g64 - w64)
      diff = np.where(np.isnan(diff), np.inf, diff)
      within = np.isfinite(g64) & (diff <= atol + rtol * np.abs(w64))
    bad = np.where(finite, ~within,
                   np.where(np.isnan(w64), ~np.isnan(g64), g64 != w64))
    if not np.all(np.isfinite(g64[finite])):
      nan_outputs.append(i)
    if np.any(bad & ~finite):
      inf_outputs.append(i)
    mismatched += int(bad.sum())
    if not described and bad.any() and finite.all() and np.isfinite(g64).all():
      described = mismatch.describe(g64, w64, bad, atol, rtol)
    total += bad.size
    # Error figures over the reference's finite values; an exact non-finite
    # match is no error, any other mismatch there is an infinite one.
    diff = np.where(finite, diff, np.where(bad, np.inf, 0.0))
    if diff.size:
      max_abs = max(max_abs, float(diff.max()))
      rel = diff / np.maximum(np.where(finite, np.abs(w64), 1.0), 1e-12)
      max_rel = max(max_rel, float(rel.max()))
  errors = {"max_abs": max_abs, "max_rel": max_rel,
            "mismatch_share": mismatched / max(total, 1)}
  if nan_outputs:
    return _wrong(f"NaN or inf in output(s) {nan_outputs}.", errors)
  if inf_outputs:
    return _wrong(f"Output(s) {inf_outputs}: the reference's inf/NaN values "
                  "are not matched exactly.", errors)
  if mismatched:
    return _wrong("\n".join(
        [*described, f"Tolerances: atol={atol:g}, rtol={rtol:g}."]), errors)
  return Comparison(Status.OK, "", errors)

"""What a wrong output looks like next to the reference: the lines of
wrong_output feedback that say where and how it differs.

Error magnitudes alone ("max abs error 4.7") do not tell a dropped op from a
swapped one or a tile that is never written. These lines name what a person
debugging the kernel would look at first: the value ranges, a simple relation
that maps the reference onto the output (negated, scaled, shifted,
transposed, constant), which rows or columns are wrong, and the first wrong
element. Only summary figures and one element of the reference are shown, on
inputs the candidate never chooses.
"""

from __future__ import annotations

import numpy as np

MAX_LINES = 4


def _num(x: float) -> str:
  return f"{x:.3g}"


def _within(got: np.ndarray, want: np.ndarray, atol: float, rtol: float
            ) -> bool:
  # Looser than the check itself: a relation is named when it explains the
  # output up to a few tolerances, not to the last bit.
  return bool(np.all(np.abs(got - want) <= 4 * (atol + rtol * np.abs(want))))


def _relation(got: np.ndarray, want: np.ndarray, atol: float, rtol: float
              ) -> str | None:
  """The first simple map from the reference onto the output, if any."""
  if got.size > 1 and np.ptp(got) == 0 and np.ptp(want) > 0:
    return f"every output element is {_num(float(got.flat[0]))}"
  if _within(got, -want, atol, rtol):
    return "output = -expected (a sign is flipped)"
  big = np.abs(want) > max(atol, 1e-6)
  if np.any(big):
    scale = float(np.median(got[big] / want[big]))
    if scale != 0 and _within(got, scale * want, atol, rtol):
      return f"output = {_num(scale)} x expected"
  shift = float(np.median(got - want))
  if _within(got, want + shift, atol, rtol):
    return f"output = expected {'+' if shift >= 0 else '-'} {_num(abs(shift))}"
  if got.ndim == 2 and got.shape[0] == got.shape[1] and _within(
      got, want.T, atol, rtol):
    return "output = expected transposed"
  return None


def _span(name: str, bad: np.ndarray, axis: int) -> str | None:
  """'rows 64-127 of 256' when only part of that axis is wrong."""
  other = tuple(a for a in range(bad.ndim) if a != axis)
  wrong = np.flatnonzero(bad.any(axis=other))
  n = bad.shape[axis]
  if wrong.size in (0, n):
    return None
  lo, hi = int(wrong[0]), int(wrong[-1])
  if wrong.size == hi - lo + 1:
    where = f"{name} {lo}-{hi}" if hi > lo else f"{name[:-1]} {lo}"
  else:
    where = f"{wrong.size} {name} (first {lo})"
  return f"{where} of {n}"


def _sign_note(got: np.ndarray, want: np.ndarray) -> str | None:
  if want.min() >= 0 and got.min() < 0:
    return "the output has negative values; the expected has none"
  if want.max() <= 0 and got.max() > 0:
    return "the output has positive values; the expected has none"
  return None


def describe(got: np.ndarray, want: np.ndarray, bad: np.ndarray,
             atol: float, rtol: float) -> list[str]:
  """At most MAX_LINES lines on one output whose elements `bad` are wrong;
  got and want are finite float64 arrays of one shape."""
  if not bad.any():
    return []
  lines = [f"Expected values in [{_num(want.min())}, {_num(want.max())}] "
           f"(mean {_num(want.mean())}); got [{_num(got.min())}, "
           f"{_num(got.max())}] (mean {_num(got.mean())})."]
  notes = [_relation(got, want, atol, rtol), _sign_note(got, want)]
  if bad.ndim >= 2:
    # Leading axes folded: a [B, R, C] output is judged as rows x columns.
    bad2 = bad.reshape(-1, bad.shape[-1])
    spans = [_span("rows", bad2, 0), _span("columns", bad2, 1)]
    if any(spans):
      notes.append("wrong only in " + ", ".join(s for s in spans if s))
  elif bad.ndim == 1:
    notes.append(_span("elements", bad, 0))
  notes = [n for n in notes if n]
  if notes:
    lines.append("Pattern: " + "; ".join(notes) + ".")
  first = tuple(int(i) for i in np.argwhere(bad)[0])
  lines.append(f"First wrong element {list(first)}: expected "
               f"{_num(float(want[first]))}, got {_num(float(got[first]))}.")
  return lines[:MAX_LINES]

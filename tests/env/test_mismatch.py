import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest

from leap_jax.env import mismatch
from leap_jax.env.compare import compare_values

ATOL = RTOL = 1e-3
WANT = np.arange(-8.0, 8.0).reshape(4, 4) + 0.5  # [-7.5, 7.5], mean 0


def _lines(got, want=WANT):
  bad = ~np.isclose(got, want, atol=ATOL, rtol=RTOL)
  return mismatch.describe(got, want, bad, ATOL, RTOL)


def test_ranges_and_first_wrong_element_hand_computed():
  got = WANT.copy()
  got[1, 2] = 100.0
  ranges, pattern, first = _lines(got)
  assert ranges == ("Expected values in [-7.5, 7.5] (mean 0); "
                    "got [-7.5, 100] (mean 6.34).")
  assert pattern == "Pattern: wrong only in row 1 of 4, column 2 of 4."
  assert first == "First wrong element [1, 2]: expected -1.5, got 100."


@pytest.mark.parametrize("got,relation", [
    (-WANT, "output = -expected (a sign is flipped)"),
    (2.0 * WANT, "output = 2 x expected"),
    (0.5 * WANT, "output = 0.5 x expected"),
    (WANT + 1.0, "output = expected + 1"),
    (WANT - 1.0, "output = expected - 1"),
    (WANT.T.copy(), "output = expected transposed"),
    (np.zeros_like(WANT), "every output element is 0"),
])
def test_simple_relations_are_named(got, relation):
  assert relation in _lines(got)[1]


def test_missing_relu_shows_as_negative_values():
  want = np.maximum(WANT, 0.0)
  pattern = _lines(WANT, want)[1]
  assert "the output has negative values; the expected has none" in pattern
  assert "rows 0-1 of 4" in pattern  # the negative half of WANT


def test_an_unwritten_tile_is_located():
  want = np.ones((8, 256))
  got = want.copy()
  got[:, 128:] = 0.0
  pattern = _lines(got, want)[1]
  assert "columns 128-255 of 256" in pattern and "row" not in pattern


def test_scattered_rows_and_leading_axes_folded():
  want = np.ones((2, 3, 4))
  got = want.copy()
  got[0, 0, 1] = got[1, 2, 1] = 5.0
  assert "2 rows (first 0) of 6, column 1 of 4" in _lines(got, want)[1]


def test_no_lines_when_nothing_is_wrong_and_no_pattern_when_none_fits():
  assert mismatch.describe(WANT, WANT, np.zeros(WANT.shape, bool), ATOL, RTOL) == []
  got = np.sin(WANT)
  lines = _lines(got)
  assert len(lines) == 2 and lines[1].startswith("First wrong element [0, 0]")


def test_compare_values_puts_the_lines_in_the_detail():
  result = compare_values([np.float32(-WANT)], [np.float32(WANT)], ATOL, RTOL)
  assert result.detail.splitlines() == [
      "Expected values in [-7.5, 7.5] (mean 0); got [-7.5, 7.5] (mean 0).",
      "Pattern: output = -expected (a sign is flipped).",
      "First wrong element [0, 0]: expected -7.5, got 7.5.",
      "Tolerances: atol=0.001, rtol=0.001."]


@hypothesis.settings(deadline=None, max_examples=60)
@hypothesis.given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3),
                             elements=st.floats(-1e6, 1e6)),
                  st.floats(-1e6, 1e6))
def test_any_wrong_output_gives_bounded_lines(want, noise):
  got = want + noise
  bad = ~np.isclose(got, want, atol=ATOL, rtol=RTOL)
  lines = mismatch.describe(got, want, bad, ATOL, RTOL)
  assert (lines == []) == (not bad.any())
  assert len(lines) <= mismatch.MAX_LINES and all(len(ln) < 300 for ln in lines)

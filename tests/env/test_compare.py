import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest

from leap_jax.env.compare import check_arrays, compare_structure, compare_values
from leap_jax.env.verdict import Status

INF, NAN = np.inf, np.nan


def test_structure_shape_and_dtype_mismatch():
  want = [([4], "float32")]
  assert compare_structure("PyTreeDef(*)", [([4], "float32")], "PyTreeDef(*)", want) is None
  assert compare_structure("PyTreeDef((*, *))", want * 2, "PyTreeDef(*)", want).status is Status.WRONG_OUTPUT
  assert "shape" in compare_structure("PyTreeDef(*)", [([5], "float32")], "PyTreeDef(*)", want).detail
  assert "dtype" in compare_structure("PyTreeDef(*)", [([4], "float16")], "PyTreeDef(*)", want).detail


@pytest.mark.parametrize("treedef,leaves", [
    (None, [([4], "float32")]), (["PyTreeDef(*)"], [([4], "float32")]),
    ("PyTreeDef(*)", None), ("PyTreeDef(*)", "leaves"), ("PyTreeDef(*)", []),
    ("PyTreeDef(*)", [([4], "float32")] * 2), ("PyTreeDef(*)", [[4, "float32"]]),
    ("PyTreeDef(*)", [(["4"], "float32")]), ("PyTreeDef(*)", [([True], "float32")]),
    ("PyTreeDef(*)", [([4], 7)]), ("PyTreeDef(*)", [{"shape": [4]}]),
])
def test_any_malformed_header_is_wrong_output_not_an_exception(treedef, leaves):
  result = compare_structure(treedef, leaves, "PyTreeDef(*)", [([4], "float32")])
  assert result.status is Status.WRONG_OUTPUT


def test_arrays_must_have_the_reference_shape_dtype_and_count():
  want = [np.zeros((2, 3), np.float32)]
  assert check_arrays([np.ones((2, 3), np.float32)], want) is None
  for got in ([np.ones((3, 2), np.float32)], [np.ones((2, 3), np.float64)],
              [np.ones(6, np.float32)], [], want * 2, ["not an array"]):
    assert check_arrays(got, want).status is Status.WRONG_OUTPUT


def test_values_hand_computed_errors():
  want = [np.array([1.0, 2.0, 4.0, -8.0], np.float32)]
  got = [np.array([1.0, 2.5, 4.0, -8.0], np.float32)]
  result = compare_values(got, want, atol=1e-3, rtol=1e-3)
  assert result.status is Status.WRONG_OUTPUT
  assert result.errors["max_abs"] == 0.5
  assert result.errors["max_rel"] == 0.25
  assert result.errors["mismatch_share"] == 0.25
  assert compare_values(want, want, 0, 0).status is Status.OK


def test_nan_never_passes_even_with_huge_tolerance():
  want = [np.array([1.0, 2.0], np.float32)]
  got = [np.array([1.0, np.nan], np.float32)]
  result = compare_values(got, want, atol=1e30, rtol=1e30)
  assert result.status is Status.WRONG_OUTPUT and "NaN" in result.detail


@pytest.mark.parametrize("got", [[INF, 0.0], [1e30, -INF], [-INF, -INF],
                                 [NAN, -INF], [3.0, -INF]])
def test_reference_inf_needs_the_same_inf(got):
  want = [np.array([INF, -INF], np.float32)]
  result = compare_values([np.array(got, np.float32)], want, 1e30, 1e30)
  assert result.status is Status.WRONG_OUTPUT, got
  assert "not matched exactly" in result.detail
  assert result.errors["max_abs"] == INF


def test_matching_infs_and_nans_pass_with_zero_error():
  want = [np.array([INF, -INF, NAN, 1.0], np.float32)]
  got = [np.array([INF, -INF, NAN, 1.0 + 1e-7], np.float32)]
  result = compare_values(got, want, 1e-5, 1e-5)
  assert result.status is Status.OK
  assert result.errors["max_abs"] < 1e-6


def test_reference_nan_needs_a_nan():
  want = [np.array([NAN], np.float32)]
  assert compare_values([np.array([0.0], np.float32)], want, 1e30, 1e30
                        ).status is Status.WRONG_OUTPUT


_VALUES = st.sampled_from([0.0, 1.0, -1.0, 1e-3, 2.5, 1e30, INF, -INF, NAN])


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(hnp.arrays(np.float64, 6, elements=_VALUES),
                  hnp.arrays(np.float64, 6, elements=_VALUES),
                  st.sampled_from([0.0, 1e-3, 1.0]), st.sampled_from([0.0, 1e-2]))
def test_mismatches_are_numpys_isclose_with_equal_nan(got, want, atol, rtol):
  result = compare_values([got], [want], atol, rtol)
  bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
  assert result.errors["mismatch_share"] == bad.sum() / bad.size
  assert (result.status is Status.OK) == (not bad.any())

import numpy as np

from leap_jax.env.compare import compare_structure, compare_values
from leap_jax.env.verdict import Status


def test_structure_shape_and_dtype_mismatch():
  want = [([4], "float32")]
  assert compare_structure("PyTreeDef(*)", [([4], "float32")], "PyTreeDef(*)", want) is None
  assert compare_structure("PyTreeDef((*, *))", want * 2, "PyTreeDef(*)", want).status is Status.WRONG_OUTPUT
  assert "shape" in compare_structure("PyTreeDef(*)", [([5], "float32")], "PyTreeDef(*)", want).detail
  assert "dtype" in compare_structure("PyTreeDef(*)", [([4], "float16")], "PyTreeDef(*)", want).detail


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

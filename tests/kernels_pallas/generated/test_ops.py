"""Each op's line computes what its words say, on hand-picked values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernels_pallas.generated import ops

H = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float32)
U = np.array([1.0, -1.0, 2.0, 0.25, -4.0], np.float32)

EXPECTED_UNARY = {
    "neg": -H, "abs": np.abs(H), "exp": np.exp(H), "tanh": np.tanh(H),
    "relu": np.maximum(H, 0), "sigmoid": 1 / (1 + np.exp(-H)),
    "silu": H / (1 + np.exp(-H)), "square": H * H, "sin": np.sin(H),
    "cos": np.cos(H), "half": H / 2, "double": 2 * H, "inc": H + 1,
    "dec": H - 1,
}
EXPECTED_BINARY = {"add": H + U, "sub": H - U, "mul": H * U,
                   "max": np.maximum(H, U), "min": np.minimum(H, U)}


def _run(line, **values):
  namespace = {"jax": jax, "jnp": jnp, **values}
  exec(line, namespace)  # our own op lines
  return np.asarray(namespace["h"])


def test_vocabulary_is_what_the_tests_check():
  assert set(ops.UNARY) == set(EXPECTED_UNARY)
  assert set(ops.BINARY) == set(EXPECTED_BINARY)


@pytest.mark.parametrize("name", sorted(EXPECTED_UNARY))
def test_unary_line(name):
  op = ops.UNARY[name]
  got = _run(op.apply(), h=jnp.asarray(H))
  np.testing.assert_allclose(got, EXPECTED_UNARY[name], rtol=1e-6, atol=1e-6)
  if op.nonneg:
    assert (got >= 0).all()


@pytest.mark.parametrize("name", sorted(EXPECTED_BINARY))
def test_binary_line(name):
  got = _run(ops.BINARY[name].apply("u"), h=jnp.asarray(H), u=jnp.asarray(U))
  np.testing.assert_allclose(got, EXPECTED_BINARY[name], rtol=1e-6)


def test_reductions_keep_a_column():
  h = jnp.arange(6.0).reshape(2, 3)
  want = {"sum": [[3.0], [12.0]], "mean": [[1.0], [4.0]],
          "max": [[2.0], [5.0]], "min": [[0.0], [3.0]]}
  for name, op in ops.REDUCE.items():
    np.testing.assert_allclose(_run(op.apply(), h=h), want[name])


def test_flags_match_the_math():
  grows = {n for n, op in ops.UNARY.items() if op.grows}
  assert grows == {"exp", "square"}
  assert ops.SAFE_AFTER_GROWTH <= set(ops.UNARY) - grows
  assert ops.SQRT.needs_nonneg
  big = _run("h = jnp.exp(h)", h=jnp.float32(80.0))
  for name in ops.SAFE_AFTER_GROWTH:  # finite on the largest value we allow
    assert np.isfinite(_run(ops.UNARY[name].apply(), h=jnp.float32(big)))

"""Reference and candidate text: hand-checked renderings that compile."""

import ast

import jax.numpy as jnp
import numpy as np

from kernels_pallas.generated import source


def test_reference_text_and_function():
  text = source.reference(("x", "y"), ["h = h * y", "h = jnp.tanh(h)"], "x")
  assert text == ("def reference(x, y):\n  h = x\n  h = h * y\n"
                  "  h = jnp.tanh(h)\n  return h\n")
  fn = source.compile_function(text, "reference")
  x, y = jnp.array([1.0, -2.0]), jnp.array([0.5, 3.0])
  np.testing.assert_allclose(fn(x, y), np.tanh([0.5, -6.0]), rtol=1e-6)


def test_kernel_body_loads_every_ref_then_the_steps():
  text = source.kernel_body(("a", "b"), ["h = -h"], "jnp.dot(a, b)")
  assert text.splitlines() == [
      "def _kernel(a_ref, b_ref, o_ref):", "  a = a_ref[...]",
      "  b = b_ref[...]", "  h = jnp.dot(a, b)", "  h = -h",
      "  o_ref[...] = h"]


def test_candidate_is_imports_then_parts_two_blank_lines_apart():
  text = source.candidate("BLOCK = 8", "def _kernel(o_ref):\n  pass\n",
                          "def kernel(x):\n  return x\n")
  assert text.startswith(source.HEADER + "\n\nBLOCK = 8\n\n\ndef _kernel")
  assert text.endswith("def kernel(x):\n  return x\n")
  assert [n.__class__.__name__ for n in ast.parse(text).body][-3:] == [
      "Assign", "FunctionDef", "FunctionDef"]

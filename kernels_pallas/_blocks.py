"""Shared plumbing for task modules: input makers and tolerances.

Only what a model never sees lives here. Solutions stay self-contained in
their own modules (the prompt shows a module's source as an example, and a
candidate cannot import this package).
"""

import math

import jax
import jax.numpy as jnp

# f32 dots on the GPU Triton backend default to TF32 (10-bit mantissa), and
# XLA's own f32 matmuls may too. With operands scaled so each dot output is
# O(1), TF32 moves outputs by up to ~4e-3; indexing or math bugs move them by
# O(1). These tolerances sit between the two.
DOT_ATOL = 1e-2
DOT_RTOL = 1e-2


def normals(key, *specs):
  """One float32 normal array per (shape, scale) spec, from independent keys.

  Random normals are all distinct, so a block read from the wrong place
  gives wrong values rather than a lucky match.
  """
  keys = jax.random.split(key, len(specs))
  return tuple(scale * jax.random.normal(k, shape, jnp.float32)
               for k, (shape, scale) in zip(keys, specs))


def fan_in(n):
  """Scale for a weight with fan-in n, so its dot outputs stay O(1)."""
  return 1.0 / math.sqrt(n)

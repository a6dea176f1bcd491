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

# bfloat16 keeps 8 bits of mantissa: one rounding of an O(1) output moves it
# by up to ~4e-3, and a kernel that accumulates in bf16 drifts further.
BF16_ATOL = 2e-2
BF16_RTOL = 2e-2


def bf16(*arrays):
  """The arrays rounded to bfloat16 (inputs of the bf16 tasks)."""
  return tuple(a.astype(jnp.bfloat16) for a in arrays)


def uniforms(key, *specs):
  """One float32 uniform array per (shape, low, high) spec."""
  keys = jax.random.split(key, len(specs))
  return tuple(jax.random.uniform(k, shape, jnp.float32, lo, hi)
               for k, (shape, lo, hi) in zip(keys, specs))


def row_offsets(key, shape, spread, offset):
  """Normals of the given spread plus one uniform(-offset, offset) shift per
  row: rows far from zero punish exp() without a max subtracted first."""
  k_x, k_off = jax.random.split(key)
  (x,) = normals(k_x, (shape, spread))
  shift = jax.random.uniform(k_off, shape[:-1] + (1,), jnp.float32,
                             -offset, offset)
  return x + shift


def labels(key, n, classes):
  """int32 class labels in [0, classes)."""
  return jax.random.randint(key, (n,), 0, classes, jnp.int32)

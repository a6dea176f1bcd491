"""Shared checks for the family tests: a solution against its reference, run
as the environment runs it on a CPU host (interpret mode)."""

import ast
import random

import jax
import numpy as np

from kernels_pallas.generated import source
from leap_jax.env import jaxpr_tools as jt


def draws(module, n, seed=0):
  rng = random.Random(seed)
  return [module.draw(rng) for _ in range(n)]


def solution_matches_reference(instance, seed=0):
  kernel = source.compile_function(instance.candidate_text, "kernel")
  reference = source.compile_function(instance.reference_text, "reference")
  inputs = instance.make_inputs(jax.random.key(seed))
  closed, _ = jt.trace(kernel, [jax.ShapeDtypeStruct(x.shape, x.dtype)
                                for x in inputs])
  assert jt.count_pallas_calls(closed) == 1
  assert jt.compute_outside_kernels(closed) == []
  (got,) = jt.as_function(jt.with_pallas_interpret(closed, True))(*inputs)
  want = reference(*inputs)
  assert got.shape == want.shape and got.dtype == want.dtype
  np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                             atol=instance.atol, rtol=instance.rtol)


def kernel_signature(instance):
  tree = ast.parse(instance.candidate_text)
  fn = next(n for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "kernel")
  return [a.arg for a in fn.args.args]

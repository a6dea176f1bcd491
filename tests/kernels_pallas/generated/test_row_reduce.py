"""row_reduce: both forms, sqrt only on non-negative values, solutions run."""

import pytest

from kernels_pallas.generated import ops, row_reduce
from tests.kernels_pallas.generated.conftest import (draws, kernel_signature,
                                                     solution_matches_reference)

INSTANCES = draws(row_reduce, 300)


def _keeps(inst):
  return "(n, 1)" in inst.candidate_text


def test_both_forms_and_their_outputs():
  kept = [i for i in INSTANCES if _keeps(i)]
  centred = [i for i in INSTANCES if not _keeps(i)]
  assert kept and centred
  for inst in kept:
    n, _ = inst.shape
    assert f"Output: float32 {[n, 1]}" in inst.description
    assert "out_specs=pl.BlockSpec((BLOCK_N, 1)" in inst.candidate_text
  for inst in centred:
    assert "center_" in inst.combination
    assert f"Output: float32 {list(inst.shape)}" in inst.description


def test_every_draw_reduces_once_and_sqrt_follows_a_nonnegative_op():
  reductions = set(ops.REDUCE)
  for inst in INSTANCES:
    steps = inst.combination.split("-")
    assert sum(s.removeprefix("center_") in reductions
               for s in steps) == 1, steps
    if "sqrt" in steps:
      reduce_at = next(i for i, s in enumerate(steps) if s in reductions)
      assert steps[-1] == "sqrt" and reduce_at == len(steps) - 2
      assert ops.UNARY[steps[reduce_at - 1]].nonneg
    assert kernel_signature(inst) == [n for n, _, _ in inst.inputs]


@pytest.mark.parametrize("want", ["sqrt", "center_", "_y"])
def test_solution_matches_reference(want):
  inst = next(i for i in INSTANCES if want in i.combination)
  solution_matches_reference(inst)

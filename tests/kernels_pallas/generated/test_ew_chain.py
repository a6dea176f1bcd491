"""ew_chain: what its draws hold, and a few solutions run against their
references."""

import pytest

from kernels_pallas.generated import ew_chain
from tests.kernels_pallas.generated.conftest import (draws, kernel_signature,
                                                     solution_matches_reference)

INSTANCES = draws(ew_chain, 300)


def test_draws_hold_the_family_shape():
  for inst in INSTANCES:
    names = [n for n, _, _ in inst.inputs]
    n, d = inst.shape
    assert names[0] == "x" and set(names[1:]) <= {"y", "z", "v"}
    assert 1 <= inst.combination.count("-") + 1 <= 4
    for name, shape, _ in inst.inputs:
      assert shape == ((d,) if name == "v" else (n, d))
      assert f"{name} float32 {list(shape)}" in inst.description
      if name != "x":  # every other input is read by a step
        assert f"_{name}" in inst.combination
    assert kernel_signature(inst) == names
    in_specs = next(ln for ln in inst.candidate_text.splitlines()
                    if "in_specs=" in ln)
    assert in_specs.count("spec") - 1 + in_specs.count("row") == len(names)
    assert n * d <= ew_chain.MAX_ELEMENTS


def test_blocks_tile_the_shape_within_the_grid_cap():
  for inst in INSTANCES:
    n, d = inst.shape
    line = next(ln for ln in inst.candidate_text.splitlines()
                if ln.startswith("BLOCK_N, BLOCK_D"))
    block_n, block_d = map(int, line.split("=")[1].split(","))
    assert n % block_n == 0 and d % block_d == 0
    assert (n // block_n) * (d // block_d) <= ew_chain.MAX_GRID


def test_a_row_vector_gets_a_1d_block():
  inst = next(i for i in INSTANCES if any(n == "v" for n, _, _ in i.inputs))
  assert "row = pl.BlockSpec((BLOCK_D,), lambda i, j: (j,))" in inst.candidate_text
  assert "v[None, :]" in inst.reference_text


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_solution_matches_reference(index):
  inst = sorted(INSTANCES, key=lambda i: (-len(i.inputs), i.task_id))[index * 7]
  solution_matches_reference(inst)

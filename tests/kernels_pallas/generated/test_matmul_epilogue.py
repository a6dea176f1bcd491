"""matmul_epilogue: shapes, operand scales, Triton-sized blocks, solutions run."""

import math

import pytest

from kernels_pallas.generated import matmul_epilogue
from tests.kernels_pallas.generated.conftest import (draws, kernel_signature,
                                                     solution_matches_reference)

INSTANCES = draws(matmul_epilogue, 300)


def test_shapes_and_scales():
  for inst in INSTANCES:
    m, k, n = inst.shape
    shapes = {name: (shape, scale) for name, shape, scale in inst.inputs}
    assert shapes["a"] == ((m, k), 1.0)
    assert shapes["b"] == ((k, n), 1.0 / math.sqrt(k))  # dot outputs O(1)
    assert shapes.get("v", ((n,), 1.0)) == ((n,), 1.0)
    assert shapes.get("c", ((m, n), 1.0)) == ((m, n), 1.0)
    assert kernel_signature(inst) == list(shapes)
    assert "jnp.dot(a, b, preferred_element_type=jnp.float32)" in (
        inst.reference_text)


def test_blocks_are_triton_sized_and_tile_the_output():
  for inst in INSTANCES:
    m, _, n = inst.shape
    line = next(ln for ln in inst.candidate_text.splitlines()
                if ln.startswith("BLOCK_M, BLOCK_N"))
    block_m, block_n = map(int, line.split("=")[1].split(","))
    assert block_m >= 16 and block_n >= 16  # tl.dot's minimum
    assert m % block_m == 0 and n % block_n == 0
    assert (m // block_m) * (n // block_n) <= matmul_epilogue.MAX_GRID


@pytest.mark.parametrize("inputs", [2, 3, 4])
def test_solution_matches_reference(inputs):
  inst = next(i for i in INSTANCES if len(i.inputs) == inputs)
  solution_matches_reference(inst)

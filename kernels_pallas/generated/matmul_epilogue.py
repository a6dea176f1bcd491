"""Family matmul_epilogue: a @ b, then an elementwise epilogue.

a [M, K], b [K, N]; optional v [N] (a bias row, broadcast over rows) and
c [M, N] (a residual), each used by the epilogue. The solution tiles the
output with (BLOCK_M, BLOCK_N) blocks and takes all of K at once.
"""

from __future__ import annotations

import math
import random

from kernels_pallas.generated import chain, source
from kernels_pallas.generated.instance import Instance, inputs_text, shape_text

NAME = "matmul_epilogue"
COUNT = 600
SIZES_MN = (64, 128, 256)
SIZES_K = (32, 64, 128, 256)
HELD_OUT_SHAPES = frozenset({(128, 32, 256), (256, 256, 64)})
# f32 dots run as TF32 on GPU Triton (up to ~4e-3 on O(1) outputs).
ATOL = RTOL = 1e-2
DOT = "jnp.dot(a, b, preferred_element_type=jnp.float32)"
MAX_GRID = 64


def _constants(block_m: int, block_n: int) -> str:
  return f"BLOCK_M, BLOCK_N = {block_m}, {block_n}"


def _wrapper(names: tuple[str, ...]) -> str:
  specs = {"a": "pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0))",
           "b": "pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j))",
           "v": "pl.BlockSpec((BLOCK_N,), lambda i, j: (j,))",
           "c": "out"}
  lines = [f"def kernel({', '.join(names)}):",
           "  m, k = a.shape",
           "  n = b.shape[1]",
           "  out = pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j))",
           "  return pl.pallas_call(",
           "      _kernel,",
           "      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),",
           "      grid=(m // BLOCK_M, n // BLOCK_N),",
           "      in_specs=["]
  lines += [f"          {specs[nm]}," for nm in names]
  lines += ["      ],",
            "      out_specs=out,",
            f"  )({', '.join(names)})"]
  return "\n".join(lines)


def draw(rng: random.Random) -> Instance:
  others = rng.sample(["v", "c"], rng.choice([0, 1, 1, 2]))
  names = ("a", "b", *sorted(others, key="vc".index))
  length = rng.randint(max(1, len(others)), len(others) + 2)
  steps = chain.draw_until_valid(rng, length, names[2:])
  m, k, n = (rng.choice(SIZES_MN), rng.choice(SIZES_K), rng.choice(SIZES_MN))
  block_m = rng.choice([b for b in (16, 32, 64) if b <= m])
  block_n = rng.choice([b for b in (16, 32, 64, 128)
                        if b <= n and (m // block_m) * (n // b) <= MAX_GRID])
  shapes = {"a": (m, k), "b": (k, n), "v": (n,), "c": (m, n)}
  scales = {"a": 1.0, "b": 1.0 / math.sqrt(k), "v": 1.0, "c": 1.0}
  inputs = tuple((nm, shapes[nm], scales[nm]) for nm in names)
  body = chain.lines(steps)
  bias = " (v is a bias row, broadcast over the rows)" if "v" in names else ""
  description = (
      f"Matmul with an epilogue. Inputs: {inputs_text(inputs)}{bias}. "
      f"Output: float32 {shape_text((m, n))}. Starting from h = a @ b "
      f"(float32 accumulation), apply in order: {chain.words(steps)}; the "
      f"output is h.")
  return Instance(
      family=NAME, combination=chain.tokens(steps), shape=(m, k, n),
      inputs=inputs, description=description,
      reference_text=source.reference(names, body, DOT),
      candidate_text=source.candidate(_constants(block_m, block_n),
                                      source.kernel_body(names, body, DOT),
                                      _wrapper(names)),
      atol=ATOL, rtol=RTOL, level=2)

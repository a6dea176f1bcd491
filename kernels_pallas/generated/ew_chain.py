"""Family ew_chain: 1-4 elementwise ops over 1-3 inputs of one 2-D shape.

x [N, D] always; y, z [N, D] and v [D] (a row vector broadcast over rows)
are the other inputs, each used by at least one binary op. The solution
tiles [N, D] with (BLOCK_N, BLOCK_D) blocks (v with (BLOCK_D,) blocks).
"""

from __future__ import annotations

import random

from kernels_pallas.generated import chain, source
from kernels_pallas.generated.instance import Instance, inputs_text, shape_text

NAME = "ew_chain"
COUNT = 1200
ROWS = (64, 128, 256, 512)
COLS = (128, 256, 512, 1024)
MAX_ELEMENTS = 1 << 17
MAX_GRID = 64          # grid steps: interpret mode runs them one by one
# Unseen sizes for the eval split (with seen combinations too).
HELD_OUT_SHAPES = frozenset({(128, 1024), (512, 128)})
ATOL = RTOL = 1e-5


def _constants(block_n: int, block_d: int) -> str:
  return f"BLOCK_N, BLOCK_D = {block_n}, {block_d}"


def _wrapper(names: tuple[str, ...]) -> str:
  specs = ", ".join("row" if n in chain.ROW_OPERANDS else "spec" for n in names)
  lines = [f"def kernel({', '.join(names)}):",
           "  n, d = x.shape",
           "  spec = pl.BlockSpec((BLOCK_N, BLOCK_D), lambda i, j: (i, j))"]
  if any(n in chain.ROW_OPERANDS for n in names):
    lines.append("  row = pl.BlockSpec((BLOCK_D,), lambda i, j: (j,))")
  lines += ["  return pl.pallas_call(",
            "      _kernel,",
            "      out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),",
            "      grid=(n // BLOCK_N, d // BLOCK_D),",
            f"      in_specs=[{specs}],",
            "      out_specs=spec,",
            f"  )({', '.join(names)})"]
  return "\n".join(lines)


def _describe(names, shapes, steps, n, d) -> str:
  ins = inputs_text(tuple((nm, sh, 1.0) for nm, sh in zip(names, shapes)))
  row = (" (v is a row vector, broadcast over the rows)"
         if "v" in names else "")
  return (f"Elementwise chain. Inputs: {ins}{row}. Output: float32 "
          f"{shape_text((n, d))}. Starting from h = x, apply in order: "
          f"{chain.words(steps)}; the output is h.")


def draw(rng: random.Random) -> Instance:
  length = rng.randint(1, 4)
  others = rng.sample(["y", "z", "v"], rng.randint(0, min(2, length)))
  names = ("x", *sorted(others, key="yzv".index))
  steps = chain.draw_until_valid(rng, length, names[1:])
  while True:
    n, d = rng.choice(ROWS), rng.choice(COLS)
    if n * d <= MAX_ELEMENTS:
      break
  block_d = rng.choice([b for b in (128, 256) if b <= d])
  block_n = rng.choice([b for b in (8, 16, 32, 64)
                        if b <= n and (n // b) * (d // block_d) <= MAX_GRID])
  shapes = tuple((d,) if nm in chain.ROW_OPERANDS else (n, d) for nm in names)
  body = chain.lines(steps)
  candidate = source.candidate(_constants(block_n, block_d),
                               source.kernel_body(names, body, "x"),
                               _wrapper(names))
  return Instance(
      family=NAME, combination=chain.tokens(steps), shape=(n, d),
      inputs=tuple((nm, sh, 1.0) for nm, sh in zip(names, shapes)),
      description=_describe(names, shapes, steps, n, d),
      reference_text=source.reference(names, body, "x"),
      candidate_text=candidate, atol=ATOL, rtol=RTOL, level=1)

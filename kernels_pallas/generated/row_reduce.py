"""Family row_reduce: a row reduction (sum / mean / max / min) with pre- and
post-ops.

x [N, D] (and y [N, D] when a pre-op takes it). Two forms: `reduce` keeps
one value per row (output [N, 1]), `center` subtracts the row's reduction
from every entry (output [N, D]). The solution takes whole rows, BLOCK_N at
a time.
"""

from __future__ import annotations

import random

from kernels_pallas.generated import chain, ops, source
from kernels_pallas.generated.instance import Instance, inputs_text, shape_text

NAME = "row_reduce"
COUNT = 600
ROWS = (64, 128, 256, 512)
COLS = (128, 256, 512, 1024)
MAX_ELEMENTS = 1 << 18
MAX_GRID = 64
HELD_OUT_SHAPES = frozenset({(256, 128), (64, 1024)})
# Sums of up to 1024 terms in another order: ~1e-6 relative; wrong ops O(1).
ATOL = RTOL = 1e-4


def _constants(block_n: int) -> str:
  return f"BLOCK_N = {block_n}"


def _wrapper(names: tuple[str, ...], keep: bool) -> str:
  out = "(n, 1)" if keep else "(n, d)"
  out_block = "(BLOCK_N, 1)" if keep else "(BLOCK_N, d)"
  specs = ", ".join("rows" for _ in names)
  return "\n".join([
      f"def kernel({', '.join(names)}):",
      "  n, d = x.shape",
      "  rows = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))",
      "  return pl.pallas_call(",
      "      _kernel,",
      f"      out_shape=jax.ShapeDtypeStruct({out}, x.dtype),",
      "      grid=(n // BLOCK_N,),",
      f"      in_specs=[{specs}],",
      f"      out_specs=pl.BlockSpec({out_block}, lambda i: (i, 0)),",
      f"  )({', '.join(names)})"])


def _center(reduce: ops.Op) -> chain.Step:
  op = ops.Op(f"center_{reduce.name}", f"h - {reduce.line}",
              f"subtract the row {reduce.words}")
  return chain.Step(op)


def draw(rng: random.Random) -> Instance:
  keep = rng.random() < 0.6
  reduce = ops.REDUCE[rng.choice(sorted(ops.REDUCE))]
  names = ("x", "y") if rng.random() < 0.3 else ("x",)
  pre_len = rng.randint(len(names) - 1, 2)
  post_len = rng.randint(0, 1 if keep else 2)
  if pre_len + post_len == 0:
    pre_len = 1
  sqrt_after = keep and post_len == 1 and rng.random() < 0.25
  if sqrt_after:  # needs a unary pre-op that ends >= 0
    pre_len = max(pre_len, len(names))
  pre = chain.draw_until_valid(rng, pre_len, names[1:],
                               end_nonneg=sqrt_after) if pre_len else ()
  if sqrt_after:
    post = (chain.Step(ops.SQRT),)
  else:
    post = chain.draw_until_valid(rng, post_len, (), grown=chain.grows(pre))
  middle = chain.Step(ops.Op(reduce.name, reduce.line, f"row {reduce.words}")
                      ) if keep else _center(reduce)
  steps = (*pre, middle, *post)
  while True:
    n, d = rng.choice(ROWS), rng.choice(COLS)
    if n * d <= MAX_ELEMENTS:
      break
  block_n = rng.choice([b for b in (8, 16, 32, 64)
                        if b <= n and n // b <= MAX_GRID])
  inputs = tuple((nm, (n, d), 1.0) for nm in names)
  out = (n, 1) if keep else (n, d)
  body = chain.lines(steps)
  form = "one value per row" if keep else "each row minus its reduction"
  description = (
      f"Row reduction ({form}). Inputs: {inputs_text(inputs)}. Output: "
      f"float32 {shape_text(out)}. Starting from h = x, apply in order: "
      f"{chain.words(steps)}; the output is h (reductions run over the last "
      f"axis and keep it as size 1).")
  return Instance(
      family=NAME, combination=chain.tokens(steps), shape=(n, d),
      inputs=inputs, description=description,
      reference_text=source.reference(names, body, "x"),
      candidate_text=source.candidate(_constants(block_n),
                                      source.kernel_body(names, body, "x"),
                                      _wrapper(names, keep)),
      atol=ATOL, rtol=RTOL, level=1)

"""The op vocabulary of the generated families: one line of jnp per op.

Each op is written once, as the line that applies it to the running value
`h`; the reference and the kernel body use the same line, so a solution is
the reference's lines moved inside a Pallas kernel. `words` is how the
description names the op.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Op:
  name: str          # in task ids: short, [a-z0-9_]
  line: str          # jnp, in terms of h (and `{u}`: the other operand)
  words: str         # in descriptions
  grows: bool = False      # can blow values up (at most one per chain)
  nonneg: bool = False     # its result is >= 0
  needs_nonneg: bool = False  # defined only for h >= 0

  def apply(self, operand: str = "") -> str:
    return "h = " + self.line.format(u=operand)

  def describe(self, operand: str = "") -> str:
    return self.words.format(u=operand)


UNARY = {op.name: op for op in (
    Op("neg", "-h", "negate"),
    Op("abs", "jnp.abs(h)", "absolute value", nonneg=True),
    Op("exp", "jnp.exp(h)", "exp", grows=True, nonneg=True),
    Op("tanh", "jnp.tanh(h)", "tanh"),
    Op("relu", "jnp.maximum(h, 0.0)", "relu", nonneg=True),
    Op("sigmoid", "jax.nn.sigmoid(h)", "sigmoid", nonneg=True),
    Op("silu", "h * jax.nn.sigmoid(h)", "silu"),
    Op("square", "h * h", "square", grows=True, nonneg=True),
    Op("sin", "jnp.sin(h)", "sin"),
    Op("cos", "jnp.cos(h)", "cos"),
    Op("half", "h * 0.5", "times 0.5"),
    Op("double", "h * 2.0", "times 2"),
    Op("inc", "h + 1.0", "plus 1"),
    Op("dec", "h - 1.0", "minus 1"),
)}

# After an op that grows, only ops that stay exact on large values.
SAFE_AFTER_GROWTH = frozenset({"neg", "abs", "relu", "tanh", "sigmoid",
                               "half", "inc", "dec"})

# Ops whose argument is another input `u` (same shape as h, or a row
# vector broadcast over rows: the operand is then written `u[None, :]`).
BINARY = {op.name: op for op in (
    Op("add", "h + {u}", "add {u}"),
    Op("sub", "h - {u}", "subtract {u}"),
    Op("mul", "h * {u}", "multiply by {u}"),
    Op("max", "jnp.maximum(h, {u})", "elementwise max with {u}"),
    Op("min", "jnp.minimum(h, {u})", "elementwise min with {u}"),
)}

# Row reductions over the last axis, kept as a [rows, 1] column.
REDUCE = {op.name: op for op in (
    Op("sum", "jnp.sum(h, axis=1, keepdims=True)", "sum"),
    Op("mean", "jnp.mean(h, axis=1, keepdims=True)", "mean"),
    Op("max", "jnp.max(h, axis=1, keepdims=True)", "max"),
    Op("min", "jnp.min(h, axis=1, keepdims=True)", "min"),
)}

SQRT = Op("sqrt", "jnp.sqrt(h)", "square root", needs_nonneg=True)

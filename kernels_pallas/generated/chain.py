"""Chains of ops on a running value `h`: random draws, lines, names, words."""

from __future__ import annotations

import dataclasses
import random

from kernels_pallas.generated import ops

ROW_OPERANDS = frozenset({"v"})  # row vectors [D], broadcast over rows


@dataclasses.dataclass(frozen=True)
class Step:
  op: ops.Op
  operand: str = ""        # another input's name, for binary ops

  @property
  def token(self) -> str:
    """The step in a task id: `tanh`, `mul_y`."""
    return f"{self.op.name}_{self.operand}" if self.operand else self.op.name

  @property
  def line(self) -> str:
    if not self.operand:
      return self.op.apply()
    row = self.operand in ROW_OPERANDS
    return self.op.apply(f"{self.operand}[None, :]" if row else self.operand)

  @property
  def words(self) -> str:
    return self.op.describe(self.operand)


def lines(steps: tuple[Step, ...]) -> list[str]:
  return [s.line for s in steps]


def tokens(steps: tuple[Step, ...]) -> str:
  return "-".join(s.token for s in steps)


def words(steps: tuple[Step, ...]) -> str:
  return "; ".join(s.words for s in steps)


def unary_choices(grown: bool, nonneg_needed: bool = False) -> list[str]:
  names = sorted(ops.UNARY)
  if grown:
    names = [n for n in names if n in ops.SAFE_AFTER_GROWTH]
  if nonneg_needed:
    names = [n for n in names if ops.UNARY[n].nonneg]
  return names


def draw(rng: random.Random, length: int, operands: tuple[str, ...] = (),
         grown: bool = False, end_nonneg: bool = False) -> tuple[Step, ...]:
  """`length` steps using every operand at least once (binary ops), at most
  one op that grows values (none after it but ops exact on large values),
  and, with end_nonneg, a last op whose result is >= 0."""
  if len(operands) > length:
    raise ValueError(f"{len(operands)} operands need at least as many steps")
  binary_at = sorted(rng.sample(range(length), len(operands)))
  order = list(operands)
  rng.shuffle(order)
  binary = dict(zip(binary_at, order))
  # Extra binary steps reuse an operand now and then.
  for i in range(length):
    if i not in binary and operands and rng.random() < 0.2:
      binary[i] = rng.choice(operands)
  steps = []
  for i in range(length):
    last = i == length - 1
    if i in binary and not (last and end_nonneg):
      name = rng.choice(sorted(ops.BINARY))
      steps.append(Step(ops.BINARY[name], binary[i]))
      continue
    if i in binary:  # the last step must be >= 0: apply the operand earlier
      raise _Redraw
    name = rng.choice(unary_choices(grown, last and end_nonneg))
    op = ops.UNARY[name]
    grown = grown or op.grows
    steps.append(Step(op))
  return tuple(steps)


class _Redraw(Exception):
  """This draw cannot meet the constraints; the caller draws again."""


def draw_until_valid(rng: random.Random, *args, **kwargs) -> tuple[Step, ...]:
  while True:
    try:
      return draw(rng, *args, **kwargs)
    except _Redraw:
      continue


def grows(steps: tuple[Step, ...]) -> bool:
  return any(s.op.grows for s in steps)

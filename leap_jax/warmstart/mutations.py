"""Plausible bugs injected into correct solutions, for repair examples.

Each mutation is a pure function source -> mutated source, or None when the
source offers no place for that bug. The environment then supplies the real
feedback a model would get for the bug. The first five fit any solution;
the rest fit kernels written as steps on a running value `h` (the
generated families, kernels_pallas/generated), where a slip lands on one
step, one load, one spec or one shape.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from kernels_pallas.generated import ops

Mutation = Callable[[str, random.Random], "str | None"]


def _replace_one(source: str, pattern: str, repl: Callable[[re.Match], str],
                 rng: random.Random) -> str | None:
  matches = [m for m in re.finditer(pattern, source) if repl(m) != m.group(0)]
  if not matches:
    return None
  m = rng.choice(matches)
  return source[:m.start()] + repl(m) + source[m.end():]


def wrong_block_shape(source: str, rng: random.Random) -> str | None:
  """Halves one literal block size (a tile that does not cover the data)."""
  def halve(m: re.Match) -> str:
    return f"{m.group(1)}{max(1, int(m.group(2)) // 2)}"
  return _replace_one(source, r"(BLOCK\w*\s*=\s*)(\d+)", halve, rng)


def wrong_index_map(source: str, rng: random.Random) -> str | None:
  """Swaps two block indices, or pins one index map to block 0."""
  def swap(m: re.Match) -> str:
    parts = [p.strip() for p in m.group(2).split(",") if p.strip()]
    if len(parts) >= 2:
      parts[0], parts[1] = parts[1], parts[0]
    elif parts and parts[0] != "0":
      parts = ["0"]
    return f"{m.group(1)}({', '.join(parts)}{',' if len(parts) == 1 else ''})"
  return _replace_one(source, r"(lambda [^:]+:\s*)\(([^()]*)\)", swap, rng)


def missing_init(source: str, rng: random.Random) -> str | None:
  """An accumulator that starts from ones instead of zeros."""
  return _replace_one(source, r"jnp\.zeros\(", lambda m: "jnp.ones(", rng)


def wrong_axis(source: str, rng: random.Random) -> str | None:
  """Reduces over the other axis."""
  flip = {"-1": "0", "1": "0", "0": "-1"}
  return _replace_one(source, r"axis=(-?\d)",
                      lambda m: f"axis={flip.get(m.group(1), m.group(1))}", rng)


def typo(source: str, rng: random.Random) -> str | None:
  """Misspells one use of a kernel's ref argument."""
  return _replace_one(source, r"\bo_ref\[", lambda m: "out_ref[", rng)


_STEP = r"(?m)^  h = (?!jnp\.dot)(.+)\n"   # a step after the first value
_LOAD = r"(?m)^  (\w+) = \1_ref\[\.\.\.\]\n"
_OP_LINES = sorted({op.line for op in ops.UNARY.values()})


def _steps(source: str) -> list[re.Match]:
  return [m for m in re.finditer(_STEP, source)
          if m.group(1) not in ("x", "a")]  # h = x: the starting value


def wrong_op(source: str, rng: random.Random) -> str | None:
  """One unary step replaced by another op."""
  steps = [m for m in _steps(source) if m.group(1) in _OP_LINES]
  if not steps:
    return None
  m = rng.choice(steps)
  line = rng.choice([op for op in _OP_LINES if op != m.group(1)])
  return source[:m.start(1)] + line + source[m.end(1):]


def dropped_step(source: str, rng: random.Random) -> str | None:
  """One step left out."""
  steps = _steps(source)
  if len(steps) < 2:  # a single step dropped leaves the identity
    return None
  m = rng.choice(steps)
  return source[:m.start()] + source[m.end():]


def swapped_steps(source: str, rng: random.Random) -> str | None:
  """Two neighbouring steps in the wrong order."""
  steps = _steps(source)
  pairs = [(a, b) for a, b in zip(steps, steps[1:])
           if a.end() == b.start() and a.group(0) != b.group(0)]
  if not pairs:
    return None
  a, b = rng.choice(pairs)
  return source[:a.start()] + b.group(0) + a.group(0) + source[b.end():]


def missing_load(source: str, rng: random.Random) -> str | None:
  """An input's block never loaded (its name is then undefined)."""
  loads = [m for m in re.finditer(_LOAD, source) if m.group(1) not in ("x", "a")]
  if not loads:
    return None
  m = rng.choice(loads)
  return source[:m.start()] + source[m.end():]


def wrong_operand(source: str, rng: random.Random) -> str | None:
  """A binary step reading another input than the one it should."""
  names = [m.group(1) for m in re.finditer(_LOAD, source)]
  def other(m: re.Match) -> str:
    # Only a loaded input is swapped (h, the running value, stays).
    choices = [n for n in names if n != m.group(2)]
    return m.group(0) if m.group(2) not in names or not choices else (
        f"{m.group(1)}{rng.choice(choices)}{m.group(3)}")
  return _replace_one(source, r"(  h = .*[(, ])(\w+)(\[None, :\]|\)|\n)",
                      other, rng)


def wrong_out_shape(source: str, rng: random.Random) -> str | None:
  """The output declared with the wrong shape."""
  flip = {"(n, 1)": "(n,)", "(n, d)": "(d, n)", "(m, n)": "(n, m)"}
  return _replace_one(source, r"ShapeDtypeStruct\((\([mnd, 1]+\))",
                      lambda m: m.group(0).replace(
                          m.group(1), flip.get(m.group(1), m.group(1))), rng)


def missing_in_spec(source: str, rng: random.Random) -> str | None:
  """One input without its BlockSpec."""
  def drop(m: re.Match) -> str:
    specs = [s.strip() for s in m.group(1).split(",")]
    if len(specs) < 2:
      return m.group(0)
    del specs[rng.randrange(len(specs))]
    return f"in_specs=[{', '.join(specs)}]"
  one_line = _replace_one(source, r"in_specs=\[([^\]\n]+)\]", drop, rng)
  if one_line is not None:
    return one_line
  rows = list(re.finditer(r"(?m)^          pl\.BlockSpec\(.*\),\n", source))
  if len(rows) < 2:
    return None
  m = rng.choice(rows)
  return source[:m.start()] + source[m.end():]


MUTATIONS: dict[str, Mutation] = {
    "wrong_block_shape": wrong_block_shape,
    "wrong_index_map": wrong_index_map,
    "missing_init": missing_init,
    "wrong_axis": wrong_axis,
    "typo": typo,
    "wrong_op": wrong_op,
    "dropped_step": dropped_step,
    "swapped_steps": swapped_steps,
    "missing_load": missing_load,
    "wrong_operand": wrong_operand,
    "wrong_out_shape": wrong_out_shape,
    "missing_in_spec": missing_in_spec,
}


def mutate_all(source: str, seed: int) -> dict[str, str]:
  """Every applicable mutation of `source`, by name; deterministic in seed."""
  out = {}
  for name, mutation in MUTATIONS.items():
    mutated = mutation(source, random.Random(f"{seed}:{name}"))
    if mutated is not None and mutated != source:
      out[name] = mutated
  return out

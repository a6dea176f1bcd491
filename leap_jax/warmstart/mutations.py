"""Plausible bugs injected into correct solutions, for repair examples.

Each mutation is a pure function source -> mutated source, or None when the
source offers no place for that bug. The environment then supplies the real
feedback a model would get for the bug.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

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


MUTATIONS: dict[str, Mutation] = {
    "wrong_block_shape": wrong_block_shape,
    "wrong_index_map": wrong_index_map,
    "missing_init": missing_init,
    "wrong_axis": wrong_axis,
    "typo": typo,
}


def mutate_all(source: str, seed: int) -> dict[str, str]:
  """Every applicable mutation of `source`, by name; deterministic in seed."""
  out = {}
  for name, mutation in MUTATIONS.items():
    mutated = mutation(source, random.Random(f"{seed}:{name}"))
    if mutated is not None and mutated != source:
      out[name] = mutated
  return out

"""Races a Triton GPU would have that Pallas interpret mode hides.

Interpret mode runs a pallas_call's grid programs one after another; on
Triton they run in parallel. So a program that reads back an output block
(`o_ref[...] += x`) which other programs of the grid also touch computes
the right answer on CPU and a race on the GPU.

Found from the traced jaxpr alone, for every output of every pallas_call:
  1. revisited: two programs that differ along a grid axis map to the same
     output block (the block index map is evaluated over the whole grid;
     where it cannot be, an index map that ignores the axis);
  2. accessed in the kernel body (a load, a store, `+=`) at a place that
     does not depend on that axis's `program_id` and not under a
     `pl.when(program_id(axis) == c)`, which only one program passes.
Atomics (`plgpu.atomic_add`) are the GPU's way to accumulate and are not
races. Triton-style kernels that index a whole-array output by `program_id`
(`o_ref[pl.ds(pid * B, B)] = v`) are not revisits either.

Known limits: whether a place depends on `program_id` is syntactic (an index
`j * 0` counts as depending on j), and two programs writing the same
values to the same block without reading it are not reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from jax.extend import core as jex_core

from leap_jax.env import jaxpr_tools

MAX_ENUMERATED_PROGRAMS = 1 << 16

_READS = frozenset({"get", "masked_load"})
_WRITES = frozenset({"swap", "masked_swap", "addupdate"})
_ATOMICS = frozenset({"atomic_rmw", "atomic_cas"})
_VALUE_OPERAND = {"swap": 1, "addupdate": 1}   # not part of the place

Taint = frozenset  # grid axes a value depends on

# What the index-map evaluator knows, on int64 numpy arrays.
_NUMPY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "max": np.maximum, "min": np.minimum, "neg": np.negative,
    "abs": np.abs, "sign": np.sign, "eq": np.equal, "ne": np.not_equal,
    "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "and": np.bitwise_and, "or": np.bitwise_or,
    "not": np.invert, "xor": np.bitwise_xor,
    # lax.div and lax.rem truncate toward zero (C semantics).
    "div": lambda a, b: np.trunc(np.divide(a, np.where(b == 0, 1, b))
                                 ).astype(np.int64),
    "rem": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)),
    "select_n": lambda p, *cases: np.choose(p.astype(np.int64), cases),
    "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
    "convert_element_type": lambda x: x.astype(np.int64),
    "copy": lambda x: x, "copy_p": lambda x: x,
}


def _read(env: dict, atom) -> Any:
  if isinstance(atom, jex_core.Literal):
    return np.int64(atom.val) if np.ndim(atom.val) == 0 else None
  return env.get(atom)


def _evaluate(jaxpr: jex_core.Jaxpr, args: Sequence[np.ndarray]
              ) -> list[np.ndarray] | None:
  """The jaxpr on int64 arrays (one entry per program), or None if it uses
  anything but scalar integer arithmetic."""
  env = dict(zip(jaxpr.invars, args))
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    ins = [_read(env, v) for v in eqn.invars]
    if any(x is None for x in ins):
      return None
    if name in ("pjit", "jit", "closed_call"):
      sub = eqn.params.get("jaxpr")
      sub = getattr(sub, "jaxpr", sub)
      outs = _evaluate(sub, ins) if sub is not None else None
      if outs is None:
        return None
    elif name == "integer_pow":
      outs = [ins[0] ** int(eqn.params["y"])]
    elif name in _NUMPY_OPS:
      outs = [np.asarray(_NUMPY_OPS[name](*ins), np.int64)]
    else:
      return None
    env.update(zip(eqn.outvars, outs))
  outs = [_read(env, v) for v in jaxpr.outvars]
  return None if any(o is None for o in outs) else outs


def _index_map_taint(jaxpr: jex_core.Jaxpr) -> Taint:
  """Grid axes any block index depends on (syntactically)."""
  taint = {v: Taint({a}) for a, v in enumerate(jaxpr.invars)}
  for eqn in jaxpr.eqns:
    t = Taint().union(*(taint.get(v, Taint()) for v in eqn.invars
                        if not isinstance(v, jex_core.Literal)))
    taint.update((v, t) for v in eqn.outvars)
  return Taint().union(*(taint.get(v, Taint()) for v in jaxpr.outvars
                         if not isinstance(v, jex_core.Literal)))


def revisit_axes(block_mapping, grid: Sequence[Any]) -> list[int]:
  """Grid axes along which two programs map to the same block."""
  sizes = [g if isinstance(g, int) else None for g in grid]
  closed = block_mapping.index_map_jaxpr
  jaxpr = closed.jaxpr
  n_programs = int(np.prod([s or 0 for s in sizes]))
  enumerable = (None not in sizes and len(jaxpr.invars) == len(grid)
                and not closed.consts
                and 0 < n_programs <= MAX_ENUMERATED_PROGRAMS)
  if enumerable:
    ids = np.indices(sizes).reshape(len(sizes), -1).astype(np.int64)
    blocks = _evaluate(jaxpr, list(ids))
    if blocks is not None:
      table = np.stack([np.broadcast_to(b, ids.shape[1:]) for b in blocks]
                       ) if blocks else np.zeros((0, n_programs), np.int64)
      _, block_id = np.unique(table.T, axis=0, return_inverse=True)
      block_id = block_id.reshape(sizes)
      axes = []
      for axis, size in enumerate(sizes):
        if size > 1:
          ordered = np.sort(block_id, axis=axis)
          if np.any(np.diff(ordered, axis=axis) == 0):
            axes.append(axis)
      return axes
  used = _index_map_taint(jaxpr)
  return [a for a, s in enumerate(sizes) if (s is None or s > 1)
          and a not in used]


class _Access:
  def __init__(self, primitive: str, place: Taint, guard: Taint):
    self.primitive, self.place, self.guard = primitive, place, guard


def _sub_operands(eqn) -> list[tuple[jex_core.Jaxpr, list[Any]]]:
  """(sub-jaxpr, the eqn operands its invars receive; None where unknown)."""
  name, params, ins = eqn.primitive.name, eqn.params, list(eqn.invars)
  out = []
  if name == "cond":
    for branch in params["branches"]:
      out.append((branch.jaxpr, ins[1:]))
    return out
  if name == "while":
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    carry = ins[nc + nb:]
    out.append((params["cond_jaxpr"].jaxpr, ins[:nc] + carry))
    out.append((params["body_jaxpr"].jaxpr, ins[nc:nc + nb] + carry))
    return out
  for sub in jaxpr_tools.sub_jaxprs(params):
    if len(sub.invars) >= len(ins):  # 1:1, run_scoped adds its own refs
      out.append((sub, ins + [None] * (len(sub.invars) - len(ins))))
    else:
      out.append((sub, [None] * len(sub.invars)))
  return out


def _accesses(jaxpr: jex_core.Jaxpr, refs: set, taint: dict,
              eq_axes: dict, guard: Taint, found: list) -> None:
  """Appends every access to a var in `refs`; `taint` maps vars to the grid
  axes they depend on, `eq_axes` predicates to the axes whose program they
  single out (program_id(a) == c)."""
  def t(v) -> Taint:
    return Taint() if isinstance(v, jex_core.Literal) else taint.get(v, Taint())

  for eqn in jaxpr.eqns:
    name, ins = eqn.primitive.name, list(eqn.invars)
    if name == "program_id":
      taint[eqn.outvars[0]] = Taint({eqn.params["axis"]})
      continue
    if ins and not isinstance(ins[0], jex_core.Literal) and ins[0] in refs and (
        name in _READS | _WRITES):
      skip = _VALUE_OPERAND.get(name)
      if name == "masked_swap":
        tree = eqn.params["args_tree"]
        _, _, value, _ = tree.unflatten(ins)
        skip = ins.index(value) if value in ins else None
      place = Taint().union(*(t(v) for i, v in enumerate(ins[1:], 1)
                              if i != skip))
      found.append(_Access(name, place, guard))
    elif name not in _ATOMICS:
      subs = _sub_operands(eqn)
      passed = [v for v in ins if not isinstance(v, jex_core.Literal)
                and v in refs]
      if passed and not subs:
        found.append(_Access(name, Taint(), guard))  # not followed: unsafe
      inner_guard = guard | (eq_axes.get(ins[0], Taint())
                             if name == "cond" else Taint())
      everything = Taint().union(*(t(v) for v in ins))
      for sub, operands in subs:
        sub_refs = {s for s, o in zip(sub.invars, operands)
                    if o is not None and not isinstance(o, jex_core.Literal)
                    and o in refs}
        sub_taint = {s: (t(o) if o is not None else Taint()) | (
            everything if name in ("while", "scan") else Taint())
                     for s, o in zip(sub.invars, operands)}
        if any(o is None for o in operands) and passed:
          found.append(_Access(name, Taint(), guard))
        _accesses(sub, sub_refs, sub_taint, {}, inner_guard, found)
    out = Taint().union(*(t(v) for v in ins))
    for v in eqn.outvars:
      taint[v] = out
    if name == "eq":
      a, b = (t(v) for v in ins)
      eq_axes[eqn.outvars[0]] = a ^ b if not (a and b) else Taint()
    elif name in ("convert_element_type", "and"):
      eq_axes[eqn.outvars[0]] = Taint().union(
          *(eq_axes.get(v, Taint()) for v in ins
            if not isinstance(v, jex_core.Literal)))


def _describe(axes: Iterable[int], grid) -> str:
  return ", ".join(f"{a} (size {grid[a]})" for a in axes)


def pallas_call_races(eqn, index: int) -> list[str]:
  """Why outputs of one pallas_call equation race on Triton (may be [])."""
  gm = eqn.params["grid_mapping"]
  kernel = eqn.params["jaxpr"]
  grid = tuple(gm.grid)
  first_out = gm.num_index_operands + gm.num_inputs
  reasons = []
  for k in range(gm.num_outputs):
    revisited = revisit_axes(gm.block_mappings[gm.num_inputs + k], grid)
    if not revisited:
      continue
    ref = kernel.invars[first_out + k]
    found: list[_Access] = []
    _accesses(kernel, {ref}, {}, {}, Taint(), found)
    for access in found:
      unsafe = [a for a in revisited
                if a not in access.place and a not in access.guard]
      if unsafe:
        reasons.append(
            f"GPU race in pallas_call {index}: output {k}'s block is shared "
            f"by the programs along grid axis {_describe(unsafe, grid)}, and "
            f"the kernel accesses it ({access.primitive}) at a place that "
            "does not depend on that axis's program_id. Interpret mode runs "
            "the grid in order; on the GPU its programs run in parallel. "
            "Reduce over that axis inside the kernel (a loop over blocks), "
            "give each program its own output block, or accumulate with "
            "atomics.")
        break
  return reasons


def triton_races(closed: jex_core.ClosedJaxpr) -> list[str]:
  """Why the program's pallas_calls race on a Triton GPU (may be [])."""
  calls = [e for e in jaxpr_tools.iter_eqns(closed.jaxpr, into_kernels=False)
           if e.primitive.name == jaxpr_tools.PALLAS_CALL]
  return list(itertools.chain.from_iterable(
      pallas_call_races(e, i) for i, e in enumerate(calls)))

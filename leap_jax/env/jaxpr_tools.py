"""Jaxpr walking and rewriting: structural checks and forced Pallas backends.

The environment never runs a candidate's Python at evaluation time: it traces
`kernel` once to a closed jaxpr, inspects it, rewrites every `pallas_call` to
the mode this host needs (interpret on CPU, compiled on GPU) and runs that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax.extend import core as jex_core

PALLAS_CALL = "pallas_call"

# Primitives that only move, cast or reshape data; allowed outside kernels.
GLUE_PRIMITIVES = frozenset({
    "reshape", "transpose", "pad", "slice", "dynamic_slice", "concatenate",
    "convert_element_type", "broadcast_in_dim", "squeeze", "expand_dims",
    "rev", "copy", "copy_p", "device_put", "split", "iota",
    "pjit", "jit", "closed_call", "core_call", "remat", "checkpoint",
    "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
})

# Primitives that reach back to the host; never allowed, inside or outside.
HOST_CALLBACK_PRIMITIVES = frozenset({
    "pure_callback", "io_callback", "debug_callback", "debug_print",
    "callback", "outside_call", "host_callback",
})

# Named in feedback so a model learns why its glue was rejected.
HEAVY_PRIMITIVES = frozenset({
    "dot_general", "conv_general_dilated", "reduce_sum", "reduce_max",
    "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin",
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "fft",
    "while", "scan", "cond", "reduce_precision", "top_k",
})


def sub_jaxprs(params: dict[str, Any]) -> Iterator[jex_core.Jaxpr]:
  """The jaxprs in an equation's params (branches, bodies, calls)."""
  yield from jex_core.jaxprs_in_params(params)


def iter_eqns(jaxpr: jex_core.Jaxpr, *, into_kernels: bool
              ) -> Iterator[jex_core.JaxprEqn]:
  """Every equation, recursing into sub-jaxprs; kernel bodies only if asked."""
  for eqn in jaxpr.eqns:
    yield eqn
    if eqn.primitive.name == PALLAS_CALL and not into_kernels:
      continue
    for sub in sub_jaxprs(eqn.params):
      yield from iter_eqns(sub, into_kernels=into_kernels)


def count_pallas_calls(closed: jex_core.ClosedJaxpr) -> int:
  return sum(e.primitive.name == PALLAS_CALL
             for e in iter_eqns(closed.jaxpr, into_kernels=False))


def compute_outside_kernels(closed: jex_core.ClosedJaxpr) -> list[str]:
  """Names of non-glue primitives found outside every pallas_call, sorted."""
  names = {
      e.primitive.name for e in iter_eqns(closed.jaxpr, into_kernels=False)
      if e.primitive.name != PALLAS_CALL
      and e.primitive.name not in GLUE_PRIMITIVES
  }
  return sorted(names)


def host_callbacks(closed: jex_core.ClosedJaxpr) -> list[str]:
  """Host-callback primitives anywhere in the program, kernels included."""
  names = {e.primitive.name for e in iter_eqns(closed.jaxpr, into_kernels=True)
           if e.primitive.name in HOST_CALLBACK_PRIMITIVES
           or "callback" in e.primitive.name}
  return sorted(names)


def uses_interpret(closed: jex_core.ClosedJaxpr) -> bool:
  """True if any pallas_call was built with interpret= set by its author."""
  return any(e.params.get("interpret") not in (False, None)
             for e in iter_eqns(closed.jaxpr, into_kernels=False)
             if e.primitive.name == PALLAS_CALL)


def _map_value(value: Any, fn: Callable[[jex_core.Jaxpr], jex_core.Jaxpr]):
  if isinstance(value, jex_core.ClosedJaxpr):
    return value.replace(jaxpr=fn(value.jaxpr))
  if isinstance(value, jex_core.Jaxpr):
    return fn(value)
  if isinstance(value, tuple):
    return tuple(_map_value(v, fn) for v in value)
  return value


def _set_interpret(jaxpr: jex_core.Jaxpr, interpret: bool) -> jex_core.Jaxpr:
  eqns = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == PALLAS_CALL:
      eqns.append(eqn.replace(params={**eqn.params, "interpret": interpret}))
      continue
    params = {k: _map_value(v, lambda j: _set_interpret(j, interpret))
              for k, v in eqn.params.items()}
    eqns.append(eqn.replace(params=params))
  return jaxpr.replace(eqns=eqns)


def with_pallas_interpret(closed: jex_core.ClosedJaxpr,
                          interpret: bool) -> jex_core.ClosedJaxpr:
  """The same program with every pallas_call's `interpret` set as given."""
  return closed.replace(jaxpr=_set_interpret(closed.jaxpr, interpret))


def as_function(closed: jex_core.ClosedJaxpr) -> Callable[..., Any]:
  """A jittable function that evaluates `closed`, returning a flat list."""
  def run(*args):
    return jex_core.jaxpr_as_fun(closed)(*args)
  return run


def trace(fn: Callable[..., Any], arg_shapes) -> tuple[jex_core.ClosedJaxpr, Any]:
  """Closed jaxpr of `fn` on abstract inputs plus the output pytree shape."""
  closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*arg_shapes)
  return closed, out_shape

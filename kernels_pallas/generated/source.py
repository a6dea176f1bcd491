"""Text of generated tasks: the reference function and the candidate answer.

A generated task has no module of its own, so its reference and solution
exist as source text first; the callables are made from that text (exec of
our own code), so what the model is shown and what is run never differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

HEADER = ("import jax\nimport jax.numpy as jnp\n"
          "from jax.experimental import pallas as pl\n")


def reference(inputs: Sequence[str], body: Sequence[str], first: str) -> str:
  """def reference(x, y): h = <first>; <body>; return h."""
  lines = [f"def reference({', '.join(inputs)}):", f"  h = {first}"]
  lines += [f"  {line}" for line in body]
  lines.append("  return h")
  return "\n".join(lines) + "\n"


def kernel_body(inputs: Sequence[str], body: Sequence[str], first: str) -> str:
  """The Pallas kernel: load every ref, then the reference's lines."""
  refs = ", ".join(f"{n}_ref" for n in inputs) + ", o_ref"
  lines = [f"def _kernel({refs}):"]
  lines += [f"  {n} = {n}_ref[...]" for n in inputs]
  lines.append(f"  h = {first}")
  lines += [f"  {line}" for line in body]
  lines.append("  o_ref[...] = h")
  return "\n".join(lines) + "\n"


def candidate(constants: str, kernel: str, wrapper: str) -> str:
  """The whole answer: imports, block constants, kernel, `kernel` wrapper."""
  parts = [HEADER, constants, kernel, wrapper]
  return "\n\n\n".join(p.strip("\n") for p in parts) + "\n"


def compile_function(source: str, name: str):
  """The function `name` defined by `source` (our own generated text)."""
  namespace = {"jax": jax, "jnp": jnp, "pl": pl}
  exec(compile(source, f"<generated {name}>", "exec"), namespace)  # pylint: disable=exec-used
  return namespace[name]

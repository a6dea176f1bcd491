"""One generated task, as data: what the family drew, rendered to text."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

Shape = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Instance:
  family: str
  combination: str              # the ops, with their operands: the split's key
  shape: Shape                  # the problem size: the split's other key
  inputs: tuple[tuple[str, Shape, float], ...]  # name, shape, normal's scale
  description: str
  reference_text: str           # def reference(...), plain jnp
  candidate_text: str           # a correct answer, as a model would write it
  atol: float
  rtol: float
  level: int

  @property
  def task_id(self) -> str:
    return f"gen/{self.family}/{self.combination}/{'x'.join(map(str, self.shape))}"

  def make_inputs(self, key: jax.Array) -> tuple[jax.Array, ...]:
    """float32 normals, one independent key per input."""
    keys = jax.random.split(key, len(self.inputs))
    return tuple(scale * jax.random.normal(k, shape, jnp.float32)
                 for k, (_, shape, scale) in zip(keys, self.inputs))


def shape_text(shape: Shape) -> str:
  return str(list(shape))


def inputs_text(inputs: tuple[tuple[str, Shape, float], ...]) -> str:
  return ", ".join(f"{name} float32 {shape_text(shape)}"
                   for name, shape, _ in inputs)

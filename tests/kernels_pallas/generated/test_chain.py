"""Chains: hand-checked text, and the draw's constraints over many draws."""

import random

from hypothesis import given, settings, strategies as st

from kernels_pallas.generated import chain, ops


def test_text_of_a_hand_made_chain():
  steps = (chain.Step(ops.BINARY["mul"], "y"), chain.Step(ops.UNARY["tanh"]),
           chain.Step(ops.BINARY["add"], "v"))
  assert chain.tokens(steps) == "mul_y-tanh-add_v"
  assert chain.lines(steps) == ["h = h * y", "h = jnp.tanh(h)",
                                "h = h + v[None, :]"]
  assert chain.words(steps) == "multiply by y; tanh; add v"
  assert not chain.grows(steps)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(0, 2),
       st.booleans())
def test_draw_meets_its_constraints(seed, length, n_operands, end_nonneg):
  operands = ("y", "z")[:min(n_operands, length)]
  steps = chain.draw_until_valid(random.Random(seed), length, operands,
                                 end_nonneg=end_nonneg and length > len(operands))
  assert len(steps) == length
  assert set(operands) <= {s.operand for s in steps}
  grew = [i for i, s in enumerate(steps) if s.op.grows]
  assert len(grew) <= 1
  if grew:  # only ops exact on large values after the one that grows
    assert all(s.operand or s.op.name in ops.SAFE_AFTER_GROWTH
               for s in steps[grew[0] + 1:])
  if end_nonneg and length > len(operands):
    assert steps[-1].op.nonneg and not steps[-1].operand


def test_draw_is_deterministic_in_its_rng():
  a = chain.draw_until_valid(random.Random(7), 4, ("y", "v"))
  b = chain.draw_until_valid(random.Random(7), 4, ("y", "v"))
  assert a == b

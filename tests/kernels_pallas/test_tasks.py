"""Every task: its solution passes the environment's checks, and its inputs
and tolerances tell right kernels from plausible wrong ones.

Solutions run as the environment runs them on a CPU host: traced once, every
pallas_call rewritten to interpret mode, and lowered for the GPU Triton
backend with lowering_platforms=("cuda",).
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.extend import core as jex_core

import kernels_pallas as kp
from leap_jax.env import jaxpr_tools as jt

TASK_IDS = kp.task_ids()
SEEDS = (1, 2)


@functools.cache
def _traced(task_id):
  task = kp.get_task(task_id)
  closed, _ = jt.trace(task.solution, task.input_shapes())
  return closed


def _interpret(fn, inputs):
  """fn's outputs (flat list) with every pallas_call in interpret mode."""
  closed, _ = jt.trace(fn, [jax.ShapeDtypeStruct(x.shape, x.dtype)
                            for x in inputs])
  return jt.as_function(jt.with_pallas_interpret(closed, True))(*inputs)


def _mismatches(got, want, task):
  """Why `got` fails the environment's check, or [] if it passes."""
  want = jax.tree.leaves(want)
  if len(got) != len(want):
    return [f"{len(got)} outputs, want {len(want)}"]
  errors = []
  for g, w in zip(got, want):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape or g.dtype != w.dtype:
      errors.append(f"{g.shape}{g.dtype} vs {w.shape}{w.dtype}")
    elif not np.allclose(g, w, atol=task.atol, rtol=task.rtol):
      errors.append(f"max abs err {np.nanmax(np.abs(g - w)):.3g}")
  return errors


@pytest.fixture
def triton_backend():
  old = jax.config.jax_pallas_use_mosaic_gpu
  jax.config.update("jax_pallas_use_mosaic_gpu", False)
  yield
  jax.config.update("jax_pallas_use_mosaic_gpu", old)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_solution_matches_reference(task_id):
  task = kp.get_task(task_id)
  run = jax.jit(jt.as_function(jt.with_pallas_interpret(_traced(task_id),
                                                        True)))
  for seed in SEEDS:
    inputs = task.make_inputs(jax.random.key(seed))
    assert _mismatches(run(*inputs), task.reference(*inputs), task) == []


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_solution_computes_only_in_kernels(task_id):
  closed = _traced(task_id)
  assert jt.count_pallas_calls(closed) >= 1
  assert jt.compute_outside_kernels(closed) == []
  assert jt.host_callbacks(closed) == []
  assert not jt.uses_interpret(closed)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_solution_lowers_for_triton(task_id, triton_backend):
  task = kp.get_task(task_id)
  fn = jt.as_function(jt.with_pallas_interpret(_traced(task_id), False))
  text = jax.jit(fn).trace(*task.input_shapes()).lower(
      lowering_platforms=("cuda",)).as_text()
  assert "triton" in text


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_kernel_dots_fit_tensor_cores(task_id):
  # Triton lowers these fine but fails to compile dots under 16 per side.
  for eqn in jt.iter_eqns(_traced(task_id).jaxpr, into_kernels=True):
    if eqn.primitive.name == "dot_general":
      for v in eqn.invars:
        assert min(v.aval.shape) >= 16, (task_id, v.aval.shape)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_inputs_are_seeded_and_outputs_vary(task_id):
  task = kp.get_task(task_id)
  a, again, b = (task.make_inputs(jax.random.key(s)) for s in (0, 0, 1))
  for x, y, z in zip(a, again, b):
    np.testing.assert_array_equal(x, y)
    assert not np.array_equal(x, z)
  for out in jax.tree.leaves(task.reference(*a)):
    out = np.asarray(out)
    assert np.all(np.isfinite(out))
    assert out.std() > 1e-2 * np.abs(out).mean() > 0


def _tf32(x):
  """Truncate to TF32's 10-bit mantissa (worse than the hardware's rounding)."""
  bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
  return jax.lax.bitcast_convert_type(bits & jnp.uint32(0xFFFFE000),
                                      jnp.float32)


def _eval_with_tf32_dots(jaxpr, consts, args):
  """Evaluate a jaxpr, rounding every dot_general's operands to TF32."""
  env = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))
  read = lambda v: v.val if isinstance(v, jex_core.Literal) else env[v]
  for eqn in jaxpr.eqns:
    vals = [read(v) for v in eqn.invars]
    sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    if eqn.primitive.name == "dot_general":
      outs = [eqn.primitive.bind(*map(_tf32, vals), **eqn.params)]
    elif isinstance(sub, jex_core.ClosedJaxpr):
      outs = _eval_with_tf32_dots(sub.jaxpr, sub.consts, vals)
    else:
      outs = eqn.primitive.bind(*vals, **eqn.params)
      outs = outs if eqn.primitive.multiple_results else [outs]
    env.update(zip(eqn.outvars, outs))
  return [read(v) for v in jaxpr.outvars]


def _reference_has_dots(task_id):
  task = kp.get_task(task_id)
  closed = jax.make_jaxpr(task.reference)(*task.input_shapes())
  return any(e.primitive.name == "dot_general"
             for e in jt.iter_eqns(closed.jaxpr, into_kernels=True))


@pytest.mark.parametrize("task_id", [t for t in TASK_IDS if _reference_has_dots(t)])
def test_tolerance_admits_tf32_dots(task_id):
  # On GPU, Triton's and XLA's default f32 dots may both run in TF32.
  task = kp.get_task(task_id)
  inputs = task.make_inputs(jax.random.key(1))
  closed = jax.make_jaxpr(task.reference)(*inputs)
  got = _eval_with_tf32_dots(closed.jaxpr, closed.consts, inputs)
  assert _mismatches(got, task.reference(*inputs), task) == []


def _solution(task_id):
  return kp.get_task(task_id).solution


def _matmul_b_by_row_id(a, b):
  """b's index map takes the row program id: block (i, j) = a_i @ b_i."""
  from kernels_pallas.level1 import matmul as t
  (m, k), n = a.shape, b.shape[1]
  return pl.pallas_call(
      t._matmul_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // t.BLOCK_M, n // t.BLOCK_N),
      in_specs=[pl.BlockSpec((t.BLOCK_M, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, t.BLOCK_N), lambda i, j: (0, i))],
      out_specs=pl.BlockSpec((t.BLOCK_M, t.BLOCK_N), lambda i, j: (i, j)),
  )(a, b)


def _softmax_block_axis0(x):
  """Softmax over each 16-row block's axis 0 instead of over each row."""
  blocks = x.reshape(-1, 16, x.shape[1])
  return jax.nn.softmax(blocks, axis=1).reshape(x.shape)


def _layer_norm_unbiased(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).sum(-1, keepdims=True) / (x.shape[-1] - 1)
  return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def _rmsnorm_stats_of_x(x, residual, weight):
  rms = jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)
  return (x + residual) / rms * weight


def _softmax_matmul_no_max(x, w):
  e = jnp.exp(x)
  return e / e.sum(-1, keepdims=True) @ w


def _gqa_tiled_heads(q, k, v):
  """Query head h reads kv head h % kv_heads (tile) instead of h // group."""
  group = q.shape[1] // k.shape[1]
  tile = lambda x: jnp.tile(x, (1, group, 1, 1))
  return _solution("level3/attention")(q, tile(k), tile(v))


# One plausible bug per family; each must fail on values, not on shapes.
WRONG = {
    "level1/sigmoid": lambda x: 1.0 / (1.0 + jnp.exp(x)),
    "level1/gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "level1/matmul": _matmul_b_by_row_id,
    "level1/batched_matmul": lambda a, b: jnp.einsum("bmk,kn->bmn", a, b[0]),
    "level1/transpose_matmul": lambda a, b: a.reshape(a.shape[::-1]) @ b,
    "level1/softmax": _softmax_block_axis0,
    "level1/layer_norm": _layer_norm_unbiased,
    "level1/col_sum": lambda x: jnp.sum(x[:-64], axis=0),  # one chunk short
    "level2/matmul_bias_relu": lambda a, b, bias: jnp.maximum(a @ b, 0) + bias,
    "level2/rmsnorm_residual": _rmsnorm_stats_of_x,
    "level2/softmax_matmul": _softmax_matmul_no_max,
    "level2/swiglu": lambda x, wg, wu: _solution("level2/swiglu")(x, wu, wg),
    "level3/attention": lambda q, k, v: _solution("level3/attention")(
        q * math.sqrt(q.shape[-1]), k, v),  # no 1/sqrt(D) scale
    "level3/causal_attention": lambda q, k, v: _solution("level3/attention")(
        q, k, v),  # no causal mask
    "level3/gqa_attention": _gqa_tiled_heads,
    "level3/mlp_block": lambda x, w1, w2: _solution("level3/mlp_block")(
        x, w1, w2) - x,  # residual dropped
}


@pytest.mark.parametrize("task_id", sorted(WRONG))
def test_plausible_wrong_kernel_is_rejected(task_id):
  task = kp.get_task(task_id)
  inputs = task.make_inputs(jax.random.key(1))
  want = task.reference(*inputs)
  got = _interpret(WRONG[task_id], inputs)
  errors = _mismatches(got, want, task)
  assert errors and all(e.startswith("max abs err") for e in errors), errors

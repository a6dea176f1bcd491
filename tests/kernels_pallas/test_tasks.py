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
# One seed keeps the suite's CI time down; the TF32 and wrong-kernel tests
# below run on seed 1, so every task still sees two input draws.
SEEDS = (2,)


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
    elif not np.allclose(g.astype(np.float64), w.astype(np.float64),
                         atol=task.atol, rtol=task.rtol):
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
    out = np.asarray(out, np.float64)
    assert np.all(np.isfinite(out))
    assert out.std() > 1e-2 * np.abs(out).mean() > 0


def _tf32(x):
  """Truncate to TF32's 10-bit mantissa (worse than the hardware's rounding)."""
  if x.dtype != jnp.float32:
    return x  # bf16 operands already carry fewer bits than TF32
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


# Single elementwise ops and reductions (level1).
WRONG.update({
    "level1/tanh": lambda x: jax.nn.sigmoid(2.0 * x),  # tanh = 2 * that - 1
    "level1/silu": lambda x: x / (1.0 + jnp.exp(x)),  # sign slip in sigmoid
    "level1/softplus": lambda x: jnp.log(1.0 + jnp.exp(x)),  # overflows
    "level1/elu": lambda x: jnp.where(x > 0, x, jnp.exp(x)),  # forgets the -1
    "level1/leaky_relu": lambda x: jnp.maximum(x, 0.0),
    "level1/hardswish": lambda x: x * jnp.clip(x + 3.0, 0.0, 6.0),  # no /6
    "level1/exp": jnp.exp2,
    "level1/abs": lambda x: jnp.maximum(x, 0.0),
    "level1/mish": lambda x: x * jnp.tanh(jnp.maximum(x, 0.0)),  # no log1p
    "level1/row_mean": lambda x: jnp.sum(x, axis=1) / 256,  # half the width
    "level1/col_mean": lambda x: jnp.mean(x[: x.shape[0] // 2], axis=0),
    "level1/col_max": lambda x: jnp.max(x[: x.shape[0] // 2], axis=0),
    "level1/row_min": lambda x: -jnp.max(x, axis=1),
    "level1/col_min": lambda x: jnp.min(x[1:], axis=0),  # skips row 0
    "level1/row_prod": lambda x: jnp.prod(x[:, :16], axis=1),
    "level1/row_logsumexp": lambda x: jnp.max(x, axis=1),
    "level1/row_var": lambda x: jnp.var(x, axis=1, ddof=1),
    "level1/row_l2_norm": lambda x: jnp.sum(x * x, axis=1),  # no sqrt
    "level1/row_argmax": lambda x: jnp.argmax(x[:, ::-1], axis=1).astype(
        jnp.int32),  # index counted from the wrong end
    "level1/col_argmax": lambda x: jnp.argmax(
        x.reshape(-1, 64, x.shape[1]), axis=1)[0].astype(jnp.int32),
    "level1/row_argmin": lambda x: jnp.argmax(x, axis=1).astype(jnp.int32),
})


# Norms, softmax variants and matmul shapes (level1).
WRONG.update({
    "level1/l2_normalize": lambda x: x / jnp.linalg.norm(x, axis=0),
    "level1/rms_norm": lambda x, w: x / jnp.sqrt(
        jnp.mean(x * x, -1, keepdims=True) + 1e-6),  # weight dropped
    "level1/batch_norm": _layer_norm_unbiased,  # stats over the wrong axis
    "level1/group_norm": lambda x, g, b: (
        (x - x.mean(2, keepdims=True)) / jnp.sqrt(x.var(2, keepdims=True)
                                                  + 1e-5)
        * g[:, None] + b[:, None]),  # instance norm: stats per channel
    "level1/log_softmax": lambda x: x - jnp.log(jnp.sum(jnp.exp(x), -1,
                                                        keepdims=True)),
    "level1/col_softmax": lambda x: jax.nn.softmax(x, axis=1),
    "level1/masked_softmax": lambda x, n: jnp.where(
        jnp.arange(x.shape[1]) < n[:, None], jax.nn.softmax(x, axis=1), 0.0),
    "level1/matmul_abt": lambda a, b: a @ b.reshape(b.shape[::-1]),
    "level1/matmul_tall_skinny": lambda a, b: a[:, :32] @ b[:32],
    "level1/matmul_bf16": lambda a, b: jnp.dot(
        a, b.T, preferred_element_type=jnp.float32).astype(jnp.bfloat16),
    "level1/vecmat": lambda x, a: jnp.sum(x[:512, None] * a[:512], axis=0),
    "level1/batched_matmul_abt": lambda a, b: a @ b.reshape(
        b.shape[0], b.shape[2], b.shape[1]),
    "level1/batched_matmul_shared": lambda x, w: jnp.broadcast_to(
        x[0] @ w, (x.shape[0], x.shape[1], w.shape[1])),
    "level1/outer_product": lambda x, y: jnp.tile(x[:64], 16)[:, None] * y,
    "level1/silu_bf16": jax.nn.sigmoid,  # forgets the factor x
})


def _conv1d_no_padding_shift(x, w):
  """Taps read x[t + k] instead of x[t + k - 1] (padding on one side only)."""
  xp = jnp.pad(x, ((0, 0), (0, 0), (0, 2)))
  return sum(jnp.einsum("oc,bct->bot", w[:, :, k], xp[:, :, k:k + x.shape[2]])
             for k in range(w.shape[2]))


# Convolutions, pooling, scans and losses (level1).
WRONG.update({
    "level1/conv1d": _conv1d_no_padding_shift,
    "level1/causal_depthwise_conv1d": lambda x, w: _solution(
        "level1/causal_depthwise_conv1d")(x, w[::-1]),  # taps reversed
    "level1/conv2d": lambda x, w: _solution("level1/conv2d")(
        x, jnp.transpose(w, (1, 0, 2, 3))),  # kh and kw swapped
    "level1/max_pool1d": lambda x: jnp.maximum(x[:, :512], x[:, 512:]),
    "level1/avg_pool1d": lambda x: x[:, ::4],  # samples instead of averaging
    "level1/max_pool2d": lambda x: x[:, :, ::2, ::2],
    "level1/avg_pool2d": lambda x: jnp.mean(
        x.reshape(x.shape[0], x.shape[1], 32, 2, 32, 2)[:, :, :, :, :, 0],
        axis=3),  # averages rows only
    "level1/cumsum_rows": lambda x: jnp.cumsum(x, axis=1) - x,  # exclusive
    "level1/cumsum_cols": lambda x: jnp.cumsum(
        x.reshape(-1, 64, x.shape[1]), axis=1).reshape(x.shape),  # no carry
    "level1/mse_loss": lambda p, t: jnp.mean(jnp.abs(p - t), axis=1),
    "level1/cross_entropy": lambda x, y: jax.nn.logsumexp(x, axis=1)
                                         - x[:, 0],  # label ignored
    "level1/huber_loss": lambda p, t: jnp.where(
        jnp.abs(p - t) < 1.0, (p - t) ** 2, jnp.abs(p - t) - 0.5),
    "level1/kl_div": lambda log_q, p: -jnp.sum(p * log_q, axis=1),  # CE only
})


def _layer_norm(h, eps=1e-5):
  mean = h.mean(-1, keepdims=True)
  return (h - mean) / jnp.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + eps)


# Fusions (level2).
WRONG.update({
    "level2/matmul_bias_gelu": lambda a, b, c: jax.nn.gelu(a @ b, True) + c,
    "level2/matmul_bias_silu": lambda a, b, c: jax.nn.silu(a @ b) + c,
    "level2/matmul_bias_tanh": lambda a, b, c: jnp.tanh(a @ b + c[::-1]),
    "level2/matmul_bias_sigmoid": lambda a, b, c: jax.nn.sigmoid(a @ b),
    "level2/matmul_bias_leaky_relu": lambda a, b, c: jax.nn.leaky_relu(
        a @ b + c, 0.01),  # default slope, not the one asked for
    "level2/matmul_bias_hardswish": lambda a, b, c: jax.nn.hard_sigmoid(
        a @ b + c),
    "level2/matmul_bias_elu": lambda a, b, c: jax.nn.relu(a @ b + c),
    "level2/matmul_bias_softplus": lambda a, b, c: jax.nn.relu(a @ b + c),
    "level2/matmul_bias_relu_bf16": lambda a, b, c: jnp.maximum(
        jnp.dot(a, b, preferred_element_type=jnp.float32), 0.0).astype(
            jnp.bfloat16) + c,
    "level2/matmul_softmax": lambda a, b: jax.nn.softmax(a @ b, axis=0),
    "level2/matmul_layer_norm": lambda a, b, g, be: _layer_norm(a @ b),
    "level2/matmul_row_max": lambda a, b: jnp.max(a @ b[:, :128], axis=1),
    "level2/matmul_scale_residual": lambda a, b, c: a @ b + c,
    "level2/matmul_add_matmul": lambda a, b, c, d: a @ b,
    "level2/layer_norm_relu": lambda x, g, b: jnp.maximum(_layer_norm(x), 0.0)
                                              * g + b,  # relu before affine
    "level2/layer_norm_gelu": lambda x: jax.nn.gelu(x, True),  # no norm
    "level2/rms_norm_silu": lambda x, w: jax.nn.silu(x) / jnp.sqrt(
        jnp.mean(x * x, -1, keepdims=True) + 1e-6) * w,  # silu first
    "level2/group_norm_silu": lambda x, g, b: jax.nn.silu(
        (x - x.mean((1, 2), keepdims=True))
        / jnp.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
        * g[:, None] + b[:, None]),  # one group over all channels
    "level2/batch_norm_relu": lambda x, g, b: jnp.maximum(
        _layer_norm(x) * g + b, 0.0),
    "level2/add_layer_norm": lambda x, r, g, b: _layer_norm(x) * g + b + r,
    "level2/add_rms_norm_bf16": lambda x, r, w: (
        x.astype(jnp.float32) / jnp.sqrt(jnp.mean(
            jnp.square(x.astype(jnp.float32)), -1, keepdims=True) + 1e-6)
        * w.astype(jnp.float32) + r.astype(jnp.float32)).astype(jnp.bfloat16),
})


WRONG.update({
    "level2/scale_softmax": lambda x: jax.nn.softmax(x, axis=-1),  # unscaled
    "level2/causal_softmax": lambda s: jax.nn.softmax(jnp.where(
        jnp.arange(256)[None, :] <= jnp.arange(256)[:, None] % 64,
        s * 0.125, -jnp.inf), axis=-1),  # mask uses the in-block row index
    "level2/geglu_act": lambda x: jax.nn.gelu(x[:, 512:], True) * x[:, :512],
    "level2/silu_mul": lambda g, u: jax.nn.silu(u) * g,
    "level2/bias_gelu_residual": lambda x, b, r: jax.nn.gelu(x, True) + b + r,
    "level2/rope": lambda x, c, s: x * jnp.concatenate([c, c], -1) + jnp.roll(
        x, 32, -1) * jnp.concatenate([s, s], -1),  # sign of x2 * sin lost
    "level2/cosine_similarity": lambda a, b: a @ b.T / jnp.linalg.norm(
        a, axis=1, keepdims=True),  # b left unnormalized
    "level2/layer_norm_matmul": lambda x, g, b, w: _layer_norm(x @ w),
    "level2/attention_scores": lambda q, k: jax.nn.softmax(
        jnp.einsum("hqd,hkd->hqk", q, k), axis=-1),  # no 1/sqrt(d)
    "level2/conv1d_relu": lambda x, w, b: jnp.maximum(
        _conv1d_no_padding_shift(x, w) + b[None, :, None], 0.0),
    "level2/conv2d_relu": lambda x, w, b: _solution("level2/conv2d_relu")(
        x, w[::-1, ::-1], b),  # flipped kernel (true convolution)
})


def _attention_jnp(q, k, v, mask=None):
  s = jnp.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
  if mask is not None:
    s = jnp.where(mask, s, -jnp.inf)
  return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(s, axis=-1), v)


# Blocks (level3).
WRONG.update({
    "level3/mqa_attention": lambda q, k, v: _attention_jnp(
        q, jnp.roll(q[:, :1], 1, axis=2), v),  # keys taken from q
    "level3/cross_attention": lambda q, k, v: _attention_jnp(
        q, k[:, :, :128], v[:, :, :128]),  # loop bound = query length
    "level3/attention_bf16": lambda q, k, v: _attention_jnp(
        *(x.astype(jnp.float32) for x in (q, k, v)),
        jnp.tril(jnp.ones((256, 256), bool))).astype(jnp.bfloat16),
    "level3/padded_attention": lambda q, k, v, n: _attention_jnp(q, k, v),
    "level3/sliding_window_attention": lambda q, k, v: _attention_jnp(
        q, k, v, jnp.tril(jnp.ones((512, 512), bool))),  # plain causal
})


WRONG.update({
    "level3/gated_mlp_block": lambda x, wg, wu, wd: x + (
        jax.nn.silu(x @ wu) * (x @ wg)) @ wd,  # gate and up swapped
    "level3/mlp_bias_relu": lambda x, w1, b1, w2, b2: jnp.maximum(
        x @ w1, 0.0) @ w2 + b1[:128] + b2,  # b1 added after the ReLU path
    "level3/conv_block": lambda x, w1, b1, w2, b2: _solution(
        "level2/conv2d_relu")(x, w1, b1) + x,  # second conv skipped
})


WRONG.update({
    "level3/transformer_layer": lambda x, g1, b1, g2, b2, *w: kp.get_task(
        "level3/transformer_layer").reference(
            x, g1, b1, g1, b1, *w),  # second norm reuses the first's params
    "level3/rmsnorm_gated_mlp_block": lambda x, nw, wg, wu, wd: _solution(
        "level3/gated_mlp_block")(x, wg, wu, wd),  # norm skipped
    "level3/gqa_causal_attention": lambda q, k, v: _solution(
        "level3/gqa_attention")(q, k, v),  # no causal mask
})


@pytest.mark.parametrize("task_id", sorted(WRONG))
def test_plausible_wrong_kernel_is_rejected(task_id):
  task = kp.get_task(task_id)
  inputs = task.make_inputs(jax.random.key(1))
  want = task.reference(*inputs)
  got = _interpret(WRONG[task_id], inputs)
  errors = _mismatches(got, want, task)
  assert errors and all(e.startswith("max abs err") for e in errors), errors

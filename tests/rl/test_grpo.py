"""GRPO loss and its gradient against an independent NumPy implementation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from leap_jax.rl import grpo

EPS_LOW, EPS_HIGH, NORM = 0.2, 0.28, 16


def np_loss_and_grad(logp, old, adv_B, mask, ref, aggregation, beta,
                     dual_clip=0.0):
  """Loops over rows and tokens; the gradient is derived by hand."""
  b, l = logp.shape
  rows = [i for i in range(b) if mask[i].any()]
  total = mask.sum()
  loss, grad = 0.0, np.zeros_like(logp)
  for i in range(b):
    for j in range(l):
      if not mask[i, j]:
        continue
      if aggregation == 'token_mean':
        w = 1.0 / total
      elif aggregation == 'seq_mean_token_mean':
        w = 1.0 / mask[i].sum() / len(rows)
      else:
        w = 1.0 / NORM / len(rows)
      a, rho = adv_B[i], np.exp(logp[i, j] - old[i, j])
      clipped = min(max(rho, 1 - EPS_LOW), 1 + EPS_HIGH)
      if rho * a <= clipped * a:  # unclipped branch: d(rho a)/dlogp = rho a
        term, d = -rho * a, -rho * a
      else:  # clipped at a bound: constant in logp
        term, d = -clipped * a, 0.0
      if dual_clip and a < 0 and -a * dual_clip < term:  # dual-clip bound
        term, d = -a * dual_clip, 0.0
      k = ref[i, j] - logp[i, j]
      term += beta * (np.exp(k) - k - 1)
      d += beta * (1 - np.exp(k))
      loss += w * term
      grad[i, j] = w * d
  return loss, grad


@pytest.mark.parametrize('aggregation', ['token_mean', 'seq_mean_token_mean',
                                         'seq_mean_token_sum_norm'])
@pytest.mark.parametrize('beta', [0.0, 0.1])
@pytest.mark.parametrize('dual_clip', [0.0, 1.5])
def test_matches_numpy(aggregation, beta, dual_clip):
  rs = np.random.RandomState(0)
  b, l = 6, 9
  old = -rs.uniform(0.5, 3, (b, l))
  # Ratios on both sides of the clip, some past the dual clip's 1.5.
  logp = old + rs.normal(0, 0.4, (b, l))
  ref = old + rs.normal(0, 0.2, (b, l))
  adv = rs.normal(0, 1, b)
  mask = rs.uniform(size=(b, l)) < 0.7
  mask[-1] = False  # a padding row: must not count as a sequence
  w = grpo.aggregation_weights(mask, aggregation, NORM)

  def f(lp):
    return grpo.grpo_loss(lp, old, adv, w, mask, ref, eps_low=EPS_LOW,
                          eps_high=EPS_HIGH, dual_clip=dual_clip,
                          kl_beta=beta)

  (loss, aux), grad = jax.jit(jax.value_and_grad(f, has_aux=True))(
      jnp.asarray(logp, jnp.float32))
  want_loss, want_grad = np_loss_and_grad(logp, old, adv, mask, ref,
                                          aggregation, beta, dual_clip)
  np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
  assert aux['tokens'] == mask.sum()
  assert 0 < aux['clipped_tokens'] < mask.sum()  # both branches exercised


def test_dual_clip_by_hand():
  # A = -1: rho 4 -> PPO's loss 4 (max(rho, clip) |A|), dual-clip caps it at
  # 3 with no gradient; rho 2 stays 2. A = +1: no dual clip (rho 4 -> -1.28).
  old = np.zeros((1, 3), np.float32)
  logp = np.log(np.array([[4.0, 2.0, 4.0]], np.float32))
  adv = np.array([[-1.0, -1.0, 1.0]], np.float32)
  loss, taken = grpo.per_token_loss(logp, old, adv, dual_clip=3.0)
  np.testing.assert_allclose(loss, [[3.0, 2.0, -1.28]], rtol=1e-6)
  np.testing.assert_array_equal(taken, [[True, False, True]])
  loss, _ = grpo.per_token_loss(logp, old, adv)
  np.testing.assert_allclose(loss, [[4.0, 2.0, -1.28]], rtol=1e-6)


def test_slip_mask_by_hand():
  # slip_prob 0.01: only tokens with A < 0 and p < 0.01 are guarded;
  # padding never is.
  logp = np.log(np.array([[0.5, 0.001, 0.2, 0.001],
                          [0.001, 0.5, 0.001, 0.9]], np.float32))
  mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
  guard = grpo.slip_mask(logp, np.array([-1.0, 0.5]), mask, 0.01)
  np.testing.assert_array_equal(guard, [[0, 1, 0, 0], [0, 0, 0, 0]])
  # Per-token advantages: the same rule token by token.
  per_token = np.array([[-1, -1, -1, -1], [0.5, 0.5, -1, -1]], np.float32)
  np.testing.assert_array_equal(grpo.slip_mask(logp, per_token, mask, 0.01),
                                [[0, 1, 0, 0], [0, 0, 1, 0]])


def test_slip_mask_ceiling_by_hand():
  # negative_max_prob 0.8 also guards the A < 0 tokens sampled above 0.8
  # (0.9 here), not those at or below it; A > 0 rows never.
  logp = np.log(np.array([[0.5, 0.001, 0.9, 0.8],
                          [0.95, 0.5, 0.001, 0.9]], np.float32))
  mask = np.ones((2, 4), bool)
  guard = grpo.slip_mask(logp, np.array([-1.0, 0.5]), mask, 0.01, 0.8)
  np.testing.assert_array_equal(guard, [[0, 1, 1, 0], [0, 0, 0, 0]])
  # The ceiling alone (slip_prob 0): only the confident tokens.
  np.testing.assert_array_equal(
      grpo.slip_mask(logp, np.array([-1.0, -1.0]), mask, 0.0, 0.8),
      [[0, 0, 1, 0], [1, 0, 0, 1]])
  # 1.0: no ceiling, the floor's rule alone.
  np.testing.assert_array_equal(
      grpo.slip_mask(logp, np.array([-1.0, 0.5]), mask, 0.01, 1.0),
      [[0, 1, 0, 0], [0, 0, 0, 0]])


def test_per_token_advantages_equal_per_row_ones():
  rs = np.random.RandomState(2)
  old = -rs.uniform(0.5, 3, (3, 5))
  logp = (old + rs.normal(0, 0.3, (3, 5))).astype(np.float32)
  mask = np.ones((3, 5), bool)
  w = grpo.aggregation_weights(mask, 'token_mean')
  adv_B = np.array([1.0, -0.5, 2.0], np.float32)
  row = grpo.grpo_loss(logp, old, adv_B, w, mask)[0]
  tok = grpo.grpo_loss(logp, old, np.repeat(adv_B[:, None], 5, 1), w, mask)[0]
  np.testing.assert_allclose(row, tok, rtol=1e-6)


def test_on_policy_ratio_is_one():
  logp = -np.ones((2, 3), np.float32)
  loss, aux = grpo.grpo_loss(logp, logp, np.array([1.0, -1.0]),
                             grpo.aggregation_weights(np.ones((2, 3)),
                                                      'token_mean'),
                             np.ones((2, 3), bool))
  np.testing.assert_allclose(loss, 0.0, atol=1e-7)  # -(1 - 1)/2
  assert aux['clipped_tokens'] == 0


def test_padding_is_inert():
  mask = np.array([[1, 1, 0]], bool)
  w = grpo.aggregation_weights(mask, 'token_mean')
  bad = np.array([[-1.0, -2.0, 300.0]], np.float32)  # exp(300) overflows
  grad = jax.grad(lambda lp: grpo.grpo_loss(
      lp, np.array([[-1.0, -2.0, -300.0]]), np.ones(1), w, mask)[0])(bad)
  assert np.isfinite(grad).all() and grad[0, 2] == 0


def test_token_logprobs():
  rs = np.random.RandomState(1)
  logits = rs.normal(size=(2, 3, 7)).astype(np.float32)
  targets = rs.randint(0, 7, (2, 3))
  got = grpo.token_logprobs(logits, targets, temperature=0.5)
  chex.assert_shape(got, (2, 3))
  want = jax.nn.log_softmax(logits / 0.5)[
      np.arange(2)[:, None], np.arange(3)[None], targets]
  np.testing.assert_allclose(got, want, atol=1e-5)

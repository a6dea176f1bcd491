"""Rollouts: DCP with a scripted policy on the real environment, and a tiny
random model end to end (rollout -> batch -> one GRPO step)."""

import dataclasses

import jax
import kernels_pallas
import numpy as np
import pytest

from leap_jax.env import verdict as verdict_lib
from leap_jax.model import sampler as sampler_lib
from leap_jax.model import transformer
from leap_jax.rl import batching, dcp, metrics, prompts, rollout, train_step
from leap_jax.rl.config import RLConfig
from tests.rl.conftest import TINY, ByteTokenizer

EASY, HOPELESS, MIDDLE = 'level1/relu', 'level1/vector_add', 'level1/sigmoid'
GARBAGE = "I don't know how to do this."
BROKEN = '```python\ndef kernel(x:\n  return x\n```'


def solution(task_id):
  source = kernels_pallas.get_task(task_id).solution_candidate_source
  return '```python\n' + source + '```'


def script(task_id, g, t):
  """Easy: always solved. Hopeless: never. Middle: g0 at once, g1 at turn 2."""
  if task_id == EASY:
    return solution(EASY)
  if task_id == HOPELESS:
    return GARBAGE
  return solution(MIDDLE) if (g == 0 or t > 0) else BROKEN


class ScriptedPolicy:
  """Answers by script; records every call (prompts decoded)."""

  def __init__(self, tokenizer):
    self.tokenizer, self.calls = tokenizer, []

  def sample(self, prompt_ids, num_samples, rng):
    texts = [self.tokenizer.decode(p) for p in prompt_ids]
    self.calls.append((texts, num_samples))
    out = []
    for text in texts:
      task_id = text.split('Task ', 1)[1].split('.\n', 1)[0]
      # Earlier answers; the generation prefix is one more assistant tag.
      turn = text.count(prompts.PLAIN_ROLE.format(role='assistant')) - 1
      for g in range(num_samples):
        answer = script(task_id, g, turn)
        ids = self.tokenizer.encode(answer)
        out.append(rollout.Completion(ids, np.full(len(ids), -1.0), answer))
    return out


class CachingJudge:
  """The real environment, each distinct (task, answer) judged once."""

  def __init__(self, env):
    self.judge, self.cache, self.evaluated = rollout.EnvJudge(env), {}, 0

  def evaluate(self, requests):
    new = sorted({r for r in requests if r not in self.cache})
    self.evaluated += len(new)
    self.cache.update(zip(new, self.judge.evaluate(new)) if new else {})
    return [self.cache[r] for r in requests]


@pytest.fixture(scope='module')
def judge(kernel_env):
  return CachingJudge(kernel_env)


def _run(mode, judge, num_samples=2, **kw):
  cfg = RLConfig(mode=mode, num_samples=num_samples, max_turns=3, **kw)
  tok = ByteTokenizer()
  policy = ScriptedPolicy(tok)
  ro = rollout.rollout([EASY, HOPELESS, MIDDLE], policy, judge,
                       prompts.PromptBuilder.from_config(tok, cfg), cfg)
  return cfg, policy, ro


def test_dcp_skips_easy_and_hopeless(judge):
  cfg, policy, ro = _run('leap', judge)
  np.testing.assert_array_equal(ro.budgets_P, [1, 1, 3])
  # Two sampler calls: turn 1 for all 3 x 2, turn 2 for the one failed
  # trajectory of the middle prompt; it is solved there, so no turn 3.
  assert ro.policy_calls == 2 and len(policy.calls) == 2
  assert [len(c[0]) for c in policy.calls] == [3, 1]
  assert [c[1] for c in policy.calls] == [2, 1]
  turn2 = policy.calls[1][0][0]
  assert f'Task {MIDDLE}.' in turn2
  assert 'def kernel(x:' in turn2  # the turn-1 code ...
  assert 'Status: syntax_error' in turn2  # ... and its feedback
  assert turn2.endswith(prompts.PLAIN_GENERATION)
  ok = ro.ok_PGT
  assert ok[0, :, 0].all() and not ok[1].any() and ok[2, 0, 0] and ok[2, 1, 1]
  assert len(ro.records) == 7
  adv = rollout.advantages(ro, cfg)
  np.testing.assert_allclose(adv[:2], 0)  # easy and hopeless: all tie
  np.testing.assert_allclose(adv[2], [[1, 0, 0], [-1, -1, 0]])
  positive_only = rollout.advantages(ro, cfg.replace(negative_weight=0.0))
  np.testing.assert_allclose(positive_only[2], [[1, 0, 0], [0, 0, 0]])
  samples = rollout.training_samples(ro, adv)
  assert [(s.prompt_index, s.sample_index, s.turn) for s in samples][-1] == (
      2, 1, 1)
  m = metrics.rollout_metrics(ro.ok_PGT, ro.active_PGT, ro.budgets_P,
                              tokens_generated=ro.tokens_generated)
  assert m['acc@1'] == 0.5 and m['acc@2'] == pytest.approx(4 / 6)
  assert m['activated_groups'] == pytest.approx(1 / 3)
  assert m['turns_per_pass'] == pytest.approx(7 / 4)


class FlakyJudge:
  """`judge`, but one request of one call is the harness's fault."""

  def __init__(self, judge, call, index):
    self.judge, self.call, self.index, self.calls = judge, call, index, 0

  def evaluate(self, requests):
    out = list(self.judge.evaluate(requests))
    if self.calls == self.call:
      out[self.index] = verdict_lib.Verdict(
          requests[self.index][0], verdict_lib.Status.HARNESS_ERROR,
          'worker failed to start twice')
    self.calls += 1
    return out


def test_a_harness_error_drops_only_its_trajectory(judge):
  # G = 3 (DCP bounds 2..2). Middle: g0 solved at once, g1 and g2 broken,
  # repaired at turn 2; two failures activate the group.
  cfg, _, ro = _run('leap', judge, num_samples=3)
  np.testing.assert_array_equal(ro.budgets_P, [1, 1, 3])
  assert not ro.dropped_PG.any()
  # k = 1, 2, 2: r = 1, -1/2, -1/2 (every turn of a non-positive reward).
  np.testing.assert_allclose(rollout.advantages(ro, cfg)[2],
                             [[1, 0, 0], [-0.5, -0.5, 0], [-0.5, -0.5, 0]])
  # Middle g2's turn-1 verdict (request 8 of the first call) is the
  # environment's failure: it is no failure for DCP (one failure left, under
  # T_min: the group is not activated), g2 is dropped alone and g0, g1 are
  # ranked between themselves.
  cfg, policy, ro = _run('leap', FlakyJudge(judge, 0, 8), num_samples=3)
  np.testing.assert_array_equal(ro.budgets_P, [1, 1, 1])
  np.testing.assert_array_equal(ro.dropped_PG[2], [False, False, True])
  assert len(policy.calls) == 1
  np.testing.assert_allclose(rollout.advantages(ro, cfg)[2],
                             [[1, 0, 0], [-1, 0, 0], [0, 0, 0]])
  # A turn-2 fault (g1's repair, request 0 of the second call) ends g1's
  # trajectory; g2's repair still counts against g0's first-turn success.
  cfg, policy, ro = _run('leap', FlakyJudge(judge, 1, 0), num_samples=3)
  np.testing.assert_array_equal(ro.budgets_P, [1, 1, 3])
  np.testing.assert_array_equal(ro.dropped_PG[2], [False, True, False])
  np.testing.assert_array_equal(ro.active_PGT[2], [[1, 0, 0], [1, 1, 0],
                                                   [1, 1, 0]])
  np.testing.assert_allclose(rollout.advantages(ro, cfg)[2],
                             [[1, 0, 0], [0, 0, 0], [-1, -1, 0]])
  samples = rollout.training_samples(ro, rollout.advantages(ro, cfg))
  assert {(s.sample_index, s.turn) for s in samples
          if s.prompt_index == 2 and s.advantage} == {(0, 0), (2, 0), (2, 1)}


def test_random_pruning_activates_dcps_count(judge):
  # DCP activates one prompt of three here (the middle one); random pruning
  # activates one too, a different one for some keys.
  chosen = set()
  for seed in range(6):
    cfg = RLConfig(mode='leap', pruning='random', num_samples=2, max_turns=3)
    tok = ByteTokenizer()
    ro = rollout.rollout([EASY, HOPELESS, MIDDLE], ScriptedPolicy(tok), judge,
                         prompts.PromptBuilder.from_config(tok, cfg), cfg,
                         rng=seed)
    assert int(np.sum(ro.budgets_P > 1)) == 1
    chosen.add(int(np.argmax(ro.budgets_P)))
    assert np.array_equal(
        ro.active_PGT, np.asarray(dcp.active_mask(ro.budgets_P, ro.ok_PGT)))
  assert len(chosen) > 1, chosen


def test_multiturn_full_runs_hopeless_prompts_to_the_end(judge):
  cfg, policy, ro = _run('multiturn_full', judge)
  np.testing.assert_array_equal(ro.budgets_P, [3, 3, 3])
  assert [len(c[0]) for c in policy.calls] == [3, 3, 2]
  assert ro.active_PGT[1].all()  # hopeless: every turn
  assert 'Status: no_code' in policy.calls[2][0][0]
  adv = rollout.advantages(ro, cfg)
  assert np.all(adv[~ro.active_PGT] == 0)


def test_single_turn_grpo(judge):
  cfg, policy, ro = _run('grpo_single_turn', judge)
  assert len(policy.calls) == 1 and ro.ok_PGT.shape == (3, 2, 1)
  adv = rollout.advantages(ro, cfg)
  np.testing.assert_allclose(adv[:, :, 0], [[0, 0], [0, 0], [1, -1]],
                             atol=1e-4)


def test_tiny_model_end_to_end(kernel_env):
  cfg = RLConfig(mode='multiturn_full', num_samples=2, max_turns=2,
                 max_new_tokens=16, micro_batch_rows=8, learning_rate=1e-3)
  graphdef, params = transformer.init(TINY, 0)
  tok = ByteTokenizer()
  policy = rollout.SamplerPolicy(
      sampler_lib.Sampler(graphdef, params, TINY, pad_id=0), tok, cfg,
      stop_token_ids=[])
  calls = []
  sample = policy.sample
  # A short first message keeps sequences (and CPU attention) small here;
  # the full task text is covered by the scripted tests.
  short = lambda tid, _: f'Task {tid}.\n' + kernels_pallas.get_task(
      tid).description
  policy.sample = lambda *a: calls.append(len(a[0])) or sample(*a)
  ro = rollout.rollout([EASY, HOPELESS], policy,
                       rollout.EnvJudge(kernel_env),
                       prompts.PromptBuilder.from_config(
                           tok, cfg, task_text_fn=short), cfg, rng=3)
  assert calls == [2, 4]  # 2 prompts x G, then every failed trajectory
  first = {(r.p, r.g): r for r in ro.records if r.t == 0}
  for r in (r for r in ro.records if r.t == 1):
    context = tok.decode(r.prompt_ids)
    assert first[(r.p, r.g)].completion.text.strip() in context
    assert first[(r.p, r.g)].verdict.feedback.strip() in context
  adv = rollout.advantages(ro, cfg)
  batch = batching.pack(rollout.training_samples(ro, adv), cfg)
  assert batch['inputs'].shape == (1, 8, 1024)  # one micro-batch, one bucket
  batch['old_logp'] = np.asarray(
      train_step.make_logprob_fn(graphdef, cfg)(params, batch))
  mismatch = train_step.logprob_mismatch(batch['old_logp'],
                                         batch['sampler_logp'], batch['mask'])
  print(mismatch)
  assert mismatch['mismatch_max_abs'] < 1e-3  # same weights, same tokens
  assert batch['mask'].sum() == ro.tokens_generated == 8 * 16
  opt = train_step.make_optimizer(cfg)
  before = jax.tree.map(np.array, params)
  new, _, m = train_step.make_train_step(graphdef, opt, cfg)(
      jax.tree.map(jax.numpy.copy, params), opt.init(params), batch)
  assert np.isfinite(float(m['loss']))
  moved = max(float(np.max(np.abs(np.asarray(a) - b)))
              for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(before)))
  assert moved > 0 or not np.any(adv)


def test_turn_rewards_per_mode(judge):
  """The rewards the advantages come from, NaN where no turn ran."""
  nan = np.nan
  cfg, _, ro = _run('leap', judge)
  # Rank rewards: easy and hopeless tie (0); middle g0 (turn 1) beats g1.
  np.testing.assert_array_equal(rollout.turn_rewards(ro, cfg), [
      [[0, nan, nan], [0, nan, nan]], [[0, nan, nan], [0, nan, nan]],
      [[1, nan, nan], [-1, -1, nan]]])
  cfg, _, ro = _run('multiturn_full', judge)
  # R_t = sum_{i>=t} 0.5^(i-t) s_i: middle g1 fails turn 1, passes turn 2.
  np.testing.assert_array_equal(rollout.turn_rewards(ro, cfg)[[0, 2]], [
      [[1, nan, nan], [1, nan, nan]], [[1, nan, nan], [0.5, 1, nan]]])
  np.testing.assert_array_equal(rollout.turn_rewards(ro, cfg)[1], 0)
  cfg, _, ro = _run('grpo_single_turn', judge)
  np.testing.assert_array_equal(rollout.turn_rewards(ro, cfg)[:, :, 0],
                                [[1, 1], [0, 0], [1, 0]])

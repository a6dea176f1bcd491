"""RLConfig: the knobs of rollouts, rewards and the GRPO update.

The method is three independent switches (design.md section 2), each
defaulting to what `mode` (a named preset) says:

  preset            pruning  reward      baseline    turns
  leap              dcp      rank        none        T
  multiturn_full    none     discounted  group_norm  T
  grpo_single_turn  none     binary      group_norm  1

pruning: dcp (turn budgets from turn-1 difficulty) | none (every failed
  trajectory gets T turns) | random (as many prompts get T turns as DCP
  would give them, chosen at random).
reward: rank (pairwise tournament on first-success turns, LEAP's per-turn
  credit) | discounted (Kevin-style per-turn returns) | binary (solved or
  not) | speed_tiebreak / speed_gate (rank with speed, design.md section 4;
  they need timed verdicts: `check_timing`).
baseline: none (the reward is the advantage; rank rewards are zero-sum) |
  group_norm (mean/std over the active turns of the prompt's group) |
  trloo (leave-one-out mean per prompt and turn, no std: Dr. Kernel).
"""

import dataclasses
import math

MODES = ('leap', 'multiturn_full', 'grpo_single_turn')
PRUNINGS = ('dcp', 'none', 'random')
REWARDS = ('rank', 'discounted', 'binary', 'speed_tiebreak', 'speed_gate')
SPEED_REWARDS = ('speed_tiebreak', 'speed_gate')
BASELINES = ('none', 'group_norm', 'trloo')
AGGREGATIONS = ('token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm')


@dataclasses.dataclass(frozen=True)
class Method:
  """The three switches a preset resolves to."""
  pruning: str
  reward: str
  baseline: str


PRESETS = {
    'leap': Method('dcp', 'rank', 'none'),
    'multiturn_full': Method('none', 'discounted', 'group_norm'),
    'grpo_single_turn': Method('none', 'binary', 'group_norm'),
}


@dataclasses.dataclass(frozen=True)
class RLConfig:
  """Hashable, so jit can take it static."""
  mode: str = 'leap'            # the preset; '' switches below take its value
  pruning: str = ''             # '' | dcp | none | random
  reward: str = ''              # '' | rank | discounted | binary | speed_*
  baseline: str = ''            # '' | none | group_norm | trloo
  num_prompts: int = 8          # P
  num_samples: int = 8          # G
  max_turns: int = 3            # T (grpo_single_turn uses 1)
  t_min: int = -1               # -1: ceil(G / 2)
  t_max: int = -1               # -1: G - 1
  gamma: float = 0.5
  speed_p: float = 1.0          # speed_gate: success needs speedup > p
  # Speed noise in |log speedup|: < 0 takes the environment's calibrated
  # band (the task's own where calibration measured it); >= 0 overrides it.
  speed_band: float = -1.0
  fast_ps: tuple[float, ...] = (1.0, 1.2, 1.5, 2.0)
  # Sampling.
  max_new_tokens: int = 1024
  temperature: float = 1.0
  top_p: float = 1.0
  # Prompt history (see prompts.py for the truncation rule).
  max_history_turns: int = 2
  max_answer_chars: int = 6000
  max_feedback_chars: int = 1500
  max_prompt_tokens: int = 3072
  # GRPO update.
  eps_low: float = 0.2
  eps_high: float = 0.28
  # Dual-clip (Ye et al. 2020, verl's clip_ratio_c): for A < 0 the loss is
  # at most -A * dual_clip, so an off-policy ratio cannot blow it up.
  # 0: off.
  dual_clip: float = 3.0
  # Slip guard: tokens with A < 0 that the rollout policy sampled with
  # probability below slip_prob carry no gradient (KernelGYM's
  # extreme_risk_prob_threshold). 0: off.
  slip_prob: float = 1e-5
  # ... and those it sampled with probability above negative_max_prob (the
  # text it was sure of: grpo.slip_mask). 1: no ceiling.
  negative_max_prob: float = 1.0
  aggregation: str = 'token_mean'
  norm_length: int = 0          # seq_mean_token_sum_norm; 0: max_new_tokens
  kl_beta: float = 0.0
  negative_weight: float = 1.0  # scale on A < 0 (1: GRPO; 0: positive-only)
  learning_rate: float = 1e-6
  weight_decay: float = 0.0
  b1: float = 0.9
  b2: float = 0.999
  adam_eps: float = 1e-8
  max_grad_norm: float = 1.0
  # Optimizer steps per rollout (verl's PPO mini-batches): the turns are
  # shuffled and split into this many parts, one step each; the clipped ratio
  # against the pre-update params' logprobs keeps the later steps near the
  # rollout policy.
  mini_batches: int = 1
  # Passes over each rollout (GRPO's mu, verl's ppo_epochs), each with its
  # own shuffle into mini_batches; every step after the first is clipped.
  epochs: int = 1
  micro_batch_rows: int = 8     # rows per micro-batch (fixed)
  num_micro_batches: int = 0    # 0: power-of-two bucket of what is needed
  min_seq_bucket: int = 128     # smallest power-of-two sequence length
  max_seq_len: int = 4096
  # What the backward pass recomputes per layer: none | full | dots
  # (model.config.REMAT_POLICIES; True/False read as full/none).
  remat: bool | str = 'none'
  # Adam moments, and an f32 master copy of lower-precision (bf16) params,
  # in this dtype; '' keeps the params' own (master_weights.py).
  optimizer_dtype: str = 'float32'

  def __post_init__(self):
    for name, allowed in (('mode', MODES), ('pruning', PRUNINGS + ('',)),
                          ('reward', REWARDS + ('',)),
                          ('baseline', BASELINES + ('',)),
                          ('aggregation', AGGREGATIONS)):
      if getattr(self, name) not in allowed:
        raise ValueError(f'rl.{name} must be one of {allowed}, got '
                         f'{getattr(self, name)!r}')
    if self.num_samples < 2:
      raise ValueError('group methods need num_samples >= 2')
    if not 0.0 <= self.negative_weight <= 1.0:
      raise ValueError('rl.negative_weight must be in [0, 1], got '
                       f'{self.negative_weight}')
    if not 0.0 <= self.slip_prob < 1.0:
      raise ValueError(f'rl.slip_prob must be in [0, 1), got {self.slip_prob}')
    if not 0.0 < self.negative_max_prob <= 1.0:
      raise ValueError('rl.negative_max_prob must be in (0, 1], got '
                       f'{self.negative_max_prob}')
    if self.dual_clip and self.dual_clip <= 1.0:
      raise ValueError('rl.dual_clip must be 0 (off) or > 1, got '
                       f'{self.dual_clip}')
    if self.mini_batches < 1 or self.epochs < 1:
      raise ValueError('rl.mini_batches and rl.epochs must be >= 1, got '
                       f'{self.mini_batches}, {self.epochs}')

  def replace(self, **kw) -> 'RLConfig':
    return dataclasses.replace(self, **kw)

  @property
  def method(self) -> Method:
    """The preset's switches, with every one set here taking precedence."""
    preset = PRESETS[self.mode]
    return Method(self.pruning or preset.pruning, self.reward or preset.reward,
                  self.baseline or preset.baseline)

  @property
  def turns(self) -> int:
    """T actually used: single-turn GRPO has one turn whatever max_turns."""
    return 1 if self.mode == 'grpo_single_turn' else self.max_turns

  @property
  def dcp_bounds(self) -> tuple[int, int]:
    """(T_min, T_max) with the paper's defaults ceil(G/2), G-1."""
    g = self.num_samples
    t_min = math.ceil(g / 2) if self.t_min < 0 else self.t_min
    t_max = g - 1 if self.t_max < 0 else self.t_max
    return t_min, t_max

  @property
  def loss_norm_length(self) -> int:
    return self.norm_length or self.max_new_tokens

  def check_timing(self, timing: bool) -> None:
    """ValueError when a speed reward would run on untimed verdicts (every
    candidate would fail the gate, or the tie-break would silently do
    nothing). The trainer calls this with config.env.timing."""
    reward = self.method.reward
    if reward in SPEED_REWARDS and not timing:
      raise ValueError(f'rl.reward={reward} needs timed verdicts: set '
                       '--config.env.timing=True, or choose another reward')

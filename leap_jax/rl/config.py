"""RLConfig: the knobs of rollouts, rewards and the GRPO update.

One `mode` field picks the algorithm (design.md section 2):
  leap             DCP turn budgets + rank reward + per-turn discounted credit
  multiturn_full   no DCP (every failed trajectory gets T turns), discounted
                   per-turn returns normalized over the prompt's group
  grpo_single_turn T = 1, binary reward, group mean/std normalization
"""

import dataclasses
import math

MODES = ('leap', 'multiturn_full', 'grpo_single_turn')
REWARDS = ('rank', 'speed_tiebreak', 'speed_gate')
AGGREGATIONS = ('token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm')


@dataclasses.dataclass(frozen=True)
class RLConfig:
  """Hashable, so jit can take it static."""
  mode: str = 'leap'
  num_prompts: int = 8          # P
  num_samples: int = 8          # G
  max_turns: int = 3            # T (grpo_single_turn uses 1)
  t_min: int = -1               # -1: ceil(G / 2)
  t_max: int = -1               # -1: G - 1
  gamma: float = 0.5
  reward: str = 'rank'          # rank | speed_tiebreak | speed_gate (leap)
  speed_p: float = 1.0          # speed_gate: success needs speedup >= p
  speed_band: float = 0.0       # speed_tiebreak: |log s_a/s_b| must exceed it
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
    if self.mode not in MODES:
      raise ValueError(f'mode must be one of {MODES}, got {self.mode!r}')
    if self.reward not in REWARDS:
      raise ValueError(f'reward must be one of {REWARDS}, got {self.reward!r}')
    if self.aggregation not in AGGREGATIONS:
      raise ValueError(f'aggregation must be one of {AGGREGATIONS}, got '
                       f'{self.aggregation!r}')
    if self.num_samples < 2:
      raise ValueError('group methods need num_samples >= 2')
    if not 0.0 <= self.negative_weight <= 1.0:
      raise ValueError('negative_weight must be in [0, 1], got '
                       f'{self.negative_weight}')
    if self.mini_batches < 1 or self.epochs < 1:
      raise ValueError('mini_batches and epochs must be >= 1, got '
                       f'{self.mini_batches}, {self.epochs}')

  def replace(self, **kw) -> 'RLConfig':
    return dataclasses.replace(self, **kw)

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

"""Per-step rollout metrics (design.md section 7).

Timing per phase (sampling, environment, update) is measured by the caller;
the update's own figures (loss, grad norm, logprob mismatch) come from
train_step.
"""

from typing import Sequence

import numpy as np

from leap_jax.rl import dcp, rewards


def rollout_metrics(ok_PGT, active_PGT, budgets_P, speedup_PGT=None,
                    fast_ps: Sequence[float] = (),
                    tokens_generated: int | None = None) -> dict[str, float]:
  """Acc@t, turns_per_pass, activated_groups, fast_p, tokens generated.

  Acc@t: share of trajectories solved by turn t (cumulative).
  turns_per_pass: all turns used by all trajectories / trajectories solved
    (the cost of one pass; NaN when nothing was solved).
  fast_p: share of trajectories whose solution is correct and faster than
    p times the reference (banded speedups: 1.0 means no significant gain).
  """
  ok_PGT = np.asarray(ok_PGT, bool)
  active_PGT = np.asarray(active_PGT, bool)
  t = ok_PGT.shape[-1]
  k_PG = np.asarray(rewards.first_success_turn(ok_PGT, active_PGT))
  solved = int(np.sum(k_PG <= t))
  used = int(np.sum(dcp.turns_used(active_PGT)))
  out = {f'acc@{i}': float(np.mean(k_PG <= i)) for i in range(1, t + 1)}
  out['turns_per_pass'] = used / solved if solved else float('nan')
  out['turns_used'] = float(used)
  out['trajectories'] = float(k_PG.size)
  out['activated_groups'] = float(np.mean(np.asarray(budgets_P) > 1))
  if speedup_PGT is not None:
    s_PG = np.asarray(rewards.at_first_success(speedup_PGT, k_PG))
    for p in fast_ps:
      fast = (k_PG <= t) & np.nan_to_num(s_PG > p, nan=False)
      out[f'fast_{p:g}'] = float(np.mean(fast))
  if tokens_generated is not None:
    out['tokens_generated'] = float(tokens_generated)
  return out

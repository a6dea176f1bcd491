"""leap-jax: LEAP multi-turn RL for writing JAX Pallas kernels.

Shape suffixes (`logits_BLV`, `q_BLKRH`): one letter, one meaning, in every
package (model/, rl/, env/, benchmarks/).

  P  prompts            G  samples per prompt    T  turns
     (these three are RL's; nothing else uses them)
  B  rows of a batch (sequences in one forward pass)
  M  micro-batches (a batch is [M, B, L])
  L  token positions of a sequence (queries, time)
  S  key/value positions (attention sources, cache slots); a prompt's
     length is S or L, never P
  D  model width          V  vocabulary           F  MLP hidden width
  H  head dim             E  half the head dim (rope tables)
  N  query heads          K  key/value heads      R  query heads per K

Digits are literal sizes (`logits_B1V`: one position). Where two batch sizes
meet (the sampler's prompts and their rows of samples), B names both and
the variable's name says which.
"""

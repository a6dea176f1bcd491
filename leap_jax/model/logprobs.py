"""Token logprobs through the output projection, a chunk of positions at a
time.

log softmax(x @ W / temperature)[target] for x [B, L, D]: at 4096 tokens
and a 152k vocabulary the [B, L, V] f32 logits are 2.5 GB per row, and
plain autodiff keeps them (and more like them) for the backward pass. Here
the chunks of C positions run in a scan whose body is rematerialised: the
forward keeps nothing of a chunk but its inputs, the backward recomputes
the chunk's logits, so neither pass holds more than [B, C, V].

(A custom VJP that accumulates the weight gradient in the weight's own
sharded layout was tried: on XLA:CPU it measured 1.3 GB more temporaries
at Qwen2.5-Coder-1.5B shapes, the per-chunk gradient being all-reduced
whole before the slice either way, so the remat form stays.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from leap_jax.model.sharding import MeshRules, constrain_rows


def _logits(x_BCD, w, transposed: bool):
  """x @ W ([D, V]; W is [V, D] when transposed), f32. 2-D matmuls on free
  reshapes, as layers.dense does (XLA:CPU relayouts einsum weights)."""
  b, c, d = x_BCD.shape
  y = x_BCD.reshape(b * c, d) @ (w.T if transposed else w)
  return y.reshape(b, c, -1).astype(jnp.float32)


def token_logprobs(x_BLD: jax.Array, w: jax.Array, targets_BL: jax.Array,
                   temperature: float = 1.0, chunk: int = 512,
                   transposed: bool = False,
                   mesh_rules: MeshRules | None = None) -> jax.Array:
  """f32 [B, L] logprobs of targets_BL (see the module docstring).

  w: the output projection [D, V], or the tied embedding table [V, D] with
  transposed=True.
  """
  b, l, d = x_BLD.shape
  c = min(chunk, l)
  n = -(-l // c)
  pad = n * c - l
  # [n, B, C, .]: the scan runs over the chunks.
  x_NBCD = jnp.pad(x_BLD, ((0, 0), (0, pad), (0, 0))).reshape(
      b, n, c, d).swapaxes(0, 1)
  t_NBC = jnp.pad(targets_BL, ((0, 0), (0, pad))).reshape(b, n, c).swapaxes(
      0, 1)

  def one_chunk(_, xt):
    x_BCD, t_BC = xt
    logits_BCV = constrain_rows(_logits(x_BCD, w, transposed),
                                mesh_rules) / temperature
    picked_BC = jnp.take_along_axis(logits_BCV, t_BC[..., None], -1)[..., 0]
    return None, picked_BC - jax.nn.logsumexp(logits_BCV, axis=-1)

  body = jax.checkpoint(one_chunk, prevent_cse=False)
  _, logp_NBC = jax.lax.scan(body, None, (x_NBCD, t_NBC))
  return logp_NBC.swapaxes(0, 1).reshape(b, n * c)[:, :l]

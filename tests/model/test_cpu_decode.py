"""cpu_decode: packed layout, kernels against numpy, when they apply."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from leap_jax.model import cpu_decode
from leap_jax.model.attention import NEG_INF
from tests.model.conftest import needs_cpu_kernels


def _rand(*shape, seed=0):
  return np.random.RandomState(seed).standard_normal(shape).astype(np.float32)


def test_pack_layout_by_hand():
  w_KN = np.arange(2 * 50, dtype=np.float32).reshape(2, 50)
  packed = cpu_decode.pack(jnp.asarray(w_KN))
  chex.assert_shape(packed.tiles, (2, 2, cpu_decode.TILE))  # 50 -> 2 tiles
  tiles = np.asarray(packed.tiles)
  assert tiles[0, 1, 5] == w_KN[1, 5]  # tile 0 holds columns 0..47
  assert tiles[1, 0, 1] == w_KN[0, 49]  # tile 1: columns 48, 49, then zeros
  assert (tiles[1, :, 2:] == 0).all()
  assert packed.shape == (2, 50) and packed.original is None
  assert packed[...] is packed
  with pytest.raises(TypeError):
    packed[0]  # pylint: disable=pointless-statement


@needs_cpu_kernels
@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 80), n=st.integers(1, 110))
def test_matches_numpy(m, k, n):
  x, w = _rand(m, k), _rand(k, n, seed=1)
  y = jax.jit(cpu_decode.matmul)(x, cpu_decode.pack(jnp.asarray(w)))
  chex.assert_shape(y, (m, n))
  np.testing.assert_allclose(np.asarray(y), x @ w, atol=1e-4, rtol=1e-4)


@needs_cpu_kernels
def test_decode_sizes_inside_a_loop():
  # SmolLM2's MLP shape, 16 rows, called from a while loop as decode does.
  x, w = _rand(16, 576), _rand(576, 1536, seed=1) * 0.05
  packed = cpu_decode.pack(jnp.asarray(w))

  @jax.jit
  def twice(x, packed):
    return jax.lax.fori_loop(
        0, 2, lambda i, x: cpu_decode.matmul(x, packed)[:, :576] * 0.1, x)

  expected = ((x @ w)[:, :576] * 0.1 @ w)[:, :576] * 0.1
  np.testing.assert_allclose(np.asarray(twice(x, packed)), expected,
                             atol=1e-5, rtol=1e-4)


@needs_cpu_kernels
def test_transposed_and_multi_dim_weights():
  x, table_NK = _rand(5, 24), _rand(70, 24, seed=2)
  packed = cpu_decode.pack(jnp.asarray(table_NK), transposed=True,
                           keep_original=True)
  np.testing.assert_allclose(
      np.asarray(cpu_decode.matmul(x, packed, transposed=True)),
      x @ table_NK.T, atol=1e-4)
  assert cpu_decode.unpacked(packed) is not None
  np.testing.assert_array_equal(cpu_decode.unpacked(packed), table_NK)
  with pytest.raises(ValueError, match='transposed'):
    cpu_decode.matmul(x, packed)
  # An output projection [heads, head_dim, embed]: two input dims.
  o_NHD = _rand(3, 8, 10, seed=3)
  packed = cpu_decode.pack(jnp.asarray(o_NHD), num_in=2)
  np.testing.assert_allclose(
      np.asarray(cpu_decode.matmul(_rand(4, 24), packed)),
      _rand(4, 24) @ o_NHD.reshape(24, 10), atol=1e-4)


def test_matmul_without_packing_is_xla_dot():
  x, w = _rand(3, 4), _rand(4, 5, seed=1)
  np.testing.assert_allclose(np.asarray(cpu_decode.matmul(x, w)), x @ w,
                             rtol=1e-6)
  np.testing.assert_allclose(
      np.asarray(cpu_decode.matmul(x, np.ascontiguousarray(w.T),
                                   transposed=True)), x @ w, rtol=1e-6)


def test_pack_state_by_name():
  state = {'layer': {'q_kernel': jnp.ones((4, 2, 3)),
                     'o_kernel': jnp.ones((2, 3, 4)),
                     'scale': jnp.ones((4,))},
           'table_VD': jnp.ones((9, 4))}
  packed = cpu_decode.pack_state(state, {'q_kernel': 1, 'o_kernel': 2},
                                 frozenset({'table_VD'}))
  q, o = packed['layer']['q_kernel'], packed['layer']['o_kernel']
  chex.assert_shape([q.tiles, o.tiles], [(1, 4, 48), (1, 6, 48)])
  assert packed['layer']['scale'] is state['layer']['scale']
  assert packed['table_VD'].transposed
  assert packed['table_VD'].original is state['table_VD']


def test_usable_only_for_f32_on_one_cpu_device():
  params = {'w': jnp.ones((4, 4))}
  assert cpu_decode.usable(params, 16) == cpu_decode.available()
  assert not cpu_decode.usable(params, cpu_decode.MAX_ROWS + 1)
  assert not cpu_decode.usable({'w': jnp.ones((4, 4), jnp.bfloat16)}, 16)
  assert not cpu_decode.usable({}, 16)
  devices = jax.devices()
  if len(devices) > 1:
    mesh = jax.sharding.Mesh(np.array(devices[:2]), ('x',))
    spread = jax.device_put(jnp.ones((4, 4)), jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec('x')))
    assert not cpu_decode.usable({'w': spread}, 16)


def test_build_errors_are_clear(monkeypatch, tmp_path):
  monkeypatch.setenv('LEAP_JAX_CACHE', str(tmp_path))
  monkeypatch.setenv('CXX', 'no-such-compiler-here')
  with pytest.raises(RuntimeError, match='no C\\+\\+ compiler'):
    cpu_decode.build()


def test_switched_off_by_environment(monkeypatch):
  monkeypatch.setenv('LEAP_JAX_CPU_KERNELS', '0')
  cpu_decode.available.cache_clear()
  try:
    assert not cpu_decode.available()
    assert not cpu_decode.usable({'w': jnp.ones((4, 4))}, 16)
  finally:
    monkeypatch.delenv('LEAP_JAX_CPU_KERNELS')
    cpu_decode.available.cache_clear()


@needs_cpu_kernels
def test_build_is_cached(tmp_path, monkeypatch):
  monkeypatch.setenv('LEAP_JAX_CACHE', str(tmp_path))
  first = cpu_decode.build()
  assert first.parent == tmp_path and first.exists()
  stamp = first.stat().st_mtime_ns
  assert cpu_decode.build() == first and first.stat().st_mtime_ns == stamp
  assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp left
  # Another CPU (a home directory shared across hosts) gets its own build.
  monkeypatch.setattr(cpu_decode, '_cpu_identity', lambda: b'flags: sse2')
  other = cpu_decode.build()
  assert other != first and other.exists() and first.exists()


def _attention_reference(q, pk, pv, valid, gk, gv, step):
  """Row x (prompt x // G) attends to its prompt's valid positions and its
  own generated positions 0..step, one softmax over both."""
  x_rows, kv, r_heads, _ = q.shape
  g = x_rows // pk.shape[0]
  out = np.zeros_like(q)
  for x in range(x_rows):
    b = x // g
    for k in range(kv):
      keys = np.concatenate([pk[b, k].T, gk[x, k][:, :step + 1].T])
      values = np.concatenate([pv[b, k], gv[x, k][:step + 1]])
      seen = np.concatenate([valid[b], np.ones(step + 1, bool)])
      for r in range(r_heads):
        scores = np.where(seen, keys @ q[x, k, r], -np.inf)
        e = np.exp(scores - scores.max())
        out[x, k, r] = e / e.sum() @ values
  return out


@needs_cpu_kernels
@pytest.mark.parametrize('b,g,kv,r,h,p,s,step', [
    (1, 16, 3, 3, 64, 320, 128, 0),  # SmolLM2's shapes, first step
    (1, 16, 3, 3, 64, 320, 128, 77),
    (2, 3, 2, 2, 8, 20, 8, 7),  # last slot; head size and P not 16-aligned
    (3, 2, 1, 4, 20, 5, 16, 3),
])
def test_attention_matches_numpy(b, g, kv, r, h, p, s, step):
  rng = np.random.RandomState(step)
  q = rng.standard_normal((b * g, kv, r, h)).astype(np.float32) * 0.3
  pk, pv = (rng.standard_normal(shape).astype(np.float32)
            for shape in ((b, kv, h, p), (b, kv, p, h)))
  gk, gv = (rng.standard_normal(shape).astype(np.float32)
            for shape in ((b * g, kv, h, s), (b * g, kv, s, h)))
  valid = rng.rand(b, p) > 0.3
  valid[0] = False  # a prompt of padding only still sees its own tokens
  bias = np.where(valid, 0.0, NEG_INF).astype(np.float32)
  out = jax.jit(cpu_decode.attention)(q, pk, pv, bias, gk, gv, step)
  chex.assert_shape(out, q.shape)
  np.testing.assert_allclose(
      np.asarray(out), _attention_reference(q, pk, pv, valid, gk, gv, step),
      atol=2e-5)


@needs_cpu_kernels
def test_attention_rejects_a_step_outside_the_cache():
  q = np.zeros((2, 1, 1, 4), np.float32)
  caches = (np.zeros((1, 1, 4, 3), np.float32), np.zeros((1, 1, 3, 4),
                                                         np.float32),
            np.zeros((1, 3), np.float32), np.zeros((2, 1, 4, 8), np.float32),
            np.zeros((2, 1, 8, 4), np.float32))
  with pytest.raises(Exception, match='step out of range'):
    jax.block_until_ready(cpu_decode.attention(q, *caches, 8))


def test_is_packed():
  assert not cpu_decode.is_packed({'w': jnp.ones((2, 2))})
  assert cpu_decode.is_packed({'w': cpu_decode.pack(jnp.ones((2, 2)))})

"""Decode-time CPU kernels (XLA FFI): packed-weight matmul and attention.

A decode step multiplies a few rows (the batch) by every weight, so it
streams the weights; XLA:CPU's GEMM repacks them on every call. `pack_state`
puts a model's matmul weights once into the layout of cpu_decode.cc (tiles
of TILE output columns, each one contiguous stream) as `Packed` values;
layer code that meets a `Packed` weight calls the kernel through `matmul`.
`attention` is one decode step's attention over a shared prompt cache and
per-row generated caches (kv_cache.SharedPrefix) in one pass, reading the
generated cache only up to the current step.

The kernels are compiled on first use with the host C++ compiler ($CXX,
else g++) into a cache directory ($LEAP_JAX_CACHE, else ~/.cache/leap_jax)
and registered with XLA. Without a compiler, or with LEAP_JAX_CPU_KERNELS=0,
`available()` is False and callers keep XLA's ops (one warning says why).
They have no autodiff and no sharding rule: only the sampler's decode loop
uses them, for unsharded f32 CPU params (`usable`).
"""

import ctypes
import functools
import hashlib
import math
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile
from typing import Mapping

import jax
import jax.numpy as jnp
from absl import logging
from flax import struct

TILE = 48  # kTile in cpu_decode.cc
# Rows up to which decode uses the kernels. Measured here: at 16 rows the
# matmul kernel takes 8.4 ms where XLA takes 11.7 (40 MLP matmuls of
# SmolLM2), at 64 rows 23.0 vs 21.8, and whole decode steps are even; the
# embedded tiny model (attention-bound) decodes 64 rows 4.4x faster.
MAX_ROWS = 64
_SOURCE = pathlib.Path(__file__).with_name('cpu_decode.cc')
_MATMUL = 'leap_cpu_matmul_packed'
_ATTENTION = 'leap_cpu_decode_attention'


@struct.dataclass
class Packed:
  """A weight in the kernel's layout: tiles [ceil(N / TILE), K, TILE].

  shape: the weight's own shape, as layer code sees it. num_in: how many of
  its leading dims are contracted (K is their product). transposed: the
  weight is [N, K] (an embedding table used as the output projection).
  original: the weight itself, kept where a layer also reads it directly.
  """
  tiles: jax.Array
  original: jax.Array | None = None
  shape: tuple[int, ...] = struct.field(pytree_node=False, default=())
  num_in: int = struct.field(pytree_node=False, default=1)
  transposed: bool = struct.field(pytree_node=False, default=False)

  def __getitem__(self, index):
    # nnx.Variable[...] reads a parameter's value through this.
    if index is not Ellipsis:
      raise TypeError('a Packed weight only supports [...]')
    return self


def cache_dir() -> pathlib.Path:
  return pathlib.Path(os.environ.get('LEAP_JAX_CACHE') or
                      pathlib.Path.home() / '.cache' / 'leap_jax')


def _compile_command(compiler: str, out: pathlib.Path) -> list[str]:
  # -fno-signed-zeros lets `0 + x` splat a scalar without an add.
  return [compiler, '-O3', '-march=native', '-fno-signed-zeros', '-std=c++17',
          '-shared', '-fPIC', '-w', '-I', jax.ffi.include_dir(), str(_SOURCE),
          '-o', str(out)]


def _cpu_identity() -> bytes:
  """What -march=native compiles for: a home directory shared by hosts of
  other CPUs must not hand them this host's library."""
  try:
    with open('/proc/cpuinfo') as f:
      return ''.join(sorted({line for line in f if line.startswith(
          ('model name', 'flags'))})).encode()
  except OSError:
    return platform.processor().encode() + platform.machine().encode()


def build() -> pathlib.Path:
  """The compiled kernels (once per source, jax version, compiler and CPU).

  Raises RuntimeError if there is no compiler or it fails.
  """
  compiler = os.environ.get('CXX') or 'g++'
  if shutil.which(compiler) is None:
    raise RuntimeError(f'no C++ compiler {compiler!r} on PATH')
  command = ' '.join(_compile_command(compiler, pathlib.Path()))
  key = hashlib.sha256(_SOURCE.read_bytes() + jax.__version__.encode() +
                       command.encode() + _cpu_identity()).hexdigest()[:16]
  lib = cache_dir() / f'cpu_decode-{key}.so'
  if lib.exists():
    return lib
  lib.parent.mkdir(parents=True, exist_ok=True)
  # Built under a temporary name, then renamed: a concurrent process never
  # loads a half-written library.
  fd, tmp = tempfile.mkstemp(suffix='.so', dir=lib.parent)
  os.close(fd)
  try:
    done = subprocess.run(_compile_command(compiler, pathlib.Path(tmp)),
                          capture_output=True, text=True)
    if done.returncode:
      raise RuntimeError(f'{compiler} failed on {_SOURCE.name}:\n'
                         f'{done.stderr[-2000:]}')
    os.replace(tmp, lib)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
  return lib


@functools.cache
def available() -> bool:
  """Whether the kernel is built and registered with XLA."""
  if os.environ.get('LEAP_JAX_CPU_KERNELS', '1') == '0':
    return False
  try:
    lib = ctypes.CDLL(str(build()))
  except (RuntimeError, OSError) as e:
    logging.warning('CPU decode kernels unavailable, using XLA dot: %s',
                    e)
    return False
  for target, symbol in ((_MATMUL, lib.LeapCpuMatmulPacked),
                         (_ATTENTION, lib.LeapCpuDecodeAttention)):
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(symbol),
                                platform='cpu')
  return True


def _require() -> None:
  if not available():
    raise RuntimeError('the cpu_decode kernels are unavailable (see the '
                       'warning logged)')


def usable(params, rows: int) -> bool:
  """Whether decoding `rows` rows with these params can use the kernel:
  f32 params on one CPU device, few rows, kernel available."""
  leaves = jax.tree.leaves(params)
  if not leaves or rows > MAX_ROWS:
    return False
  for leaf in leaves:
    sharding = getattr(leaf, 'sharding', None)
    if (sharding is None or len(sharding.device_set) != 1 or
        next(iter(sharding.device_set)).platform != 'cpu' or
        leaf.dtype != jnp.float32):
      return False
  return available()


def pack(w: jax.Array, num_in: int = 1, transposed: bool = False,
         keep_original: bool = False) -> Packed:
  """w (its first num_in dims contracted; [N, K] if transposed) -> Packed."""
  if transposed:
    w_KN = w.T
  else:
    w_KN = w.reshape(math.prod(w.shape[:num_in]), -1)
  k, n = w_KN.shape
  w_KN = jnp.pad(w_KN, ((0, 0), (0, -n % TILE)))
  tiles = w_KN.reshape(k, -1, TILE).transpose(1, 0, 2)
  return Packed(tiles, w if keep_original else None, tuple(w.shape), num_in,
                transposed)


def pack_state(state, num_in: Mapping[str, int], transposed: frozenset[str]
               = frozenset()):
  """Every leaf named in num_in or transposed, packed (transposed ones keep
  their original too); other leaves unchanged."""
  def visit(path, leaf):
    # The parameter's name: the last key that is not a container's field
    # (a Variable's value, a per-layer split's parts and index).
    names = [getattr(k, 'key', getattr(k, 'name', None)) for k in path]
    name = next((n for n in reversed(names)
                 if isinstance(n, str) and n not in ('value', 'parts')), None)
    if name in transposed:
      return pack(leaf, transposed=True, keep_original=True)
    if name in num_in:
      return pack(leaf, num_in[name])
    return leaf
  return jax.tree_util.tree_map_with_path(visit, state)


def is_packed(params) -> bool:
  """Whether any weight in params is Packed (by pack_state)."""
  return any(isinstance(leaf, Packed) for leaf in jax.tree.leaves(
      params, is_leaf=lambda x: isinstance(x, Packed)))


def unpacked(w):
  """The weight itself, whether or not it was packed."""
  return w.original if isinstance(w, Packed) else w


def matmul(x_MK: jax.Array, w, transposed: bool = False) -> jax.Array:
  """x @ w ([K, N]; x @ w.T if transposed): by the kernel if w is Packed."""
  if not isinstance(w, Packed):
    return x_MK @ (w.T if transposed else w)
  _require()
  if w.transposed != transposed:
    raise ValueError('weight packed with transposed=%s, used with %s'
                     % (w.transposed, transposed))
  n = w.shape[0] if transposed else math.prod(w.shape[w.num_in:])
  call = jax.ffi.ffi_call(_MATMUL, jax.ShapeDtypeStruct(
      (x_MK.shape[0], w.tiles.shape[0] * TILE), jnp.float32))
  y = call(x_MK.astype(jnp.float32), w.tiles)
  return y if y.shape[1] == n else y[:, :n]


def attention(q_BKRH: jax.Array, prompt_k_BKHS: jax.Array,
              prompt_v_BKSH: jax.Array, prompt_bias_BS: jax.Array,
              gen_k_BKHS: jax.Array, gen_v_BKSH: jax.Array,
              step: jax.Array) -> jax.Array:
  """softmax(q . [prompt keys, generated keys 0..step]) @ values, f32.

  Rows are prompt-major (row x belongs to prompt x // G); q is already
  scaled. prompt_bias_BS is added to the prompt scores (0, or a large
  negative at padding). The generated caches already hold this step's key
  and value.
  """
  _require()
  call = jax.ffi.ffi_call(_ATTENTION, jax.ShapeDtypeStruct(q_BKRH.shape,
                                                           jnp.float32))
  return call(q_BKRH.astype(jnp.float32), prompt_k_BKHS, prompt_v_BKSH,
              prompt_bias_BS.astype(jnp.float32), gen_k_BKHS, gen_v_BKSH,
              jnp.asarray(step, jnp.int32))

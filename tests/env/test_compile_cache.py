"""The shared warm-up programs: what the pool passes on, what a worker loads,
and that nothing of it is left when a candidate runs."""

import os

import numpy as np
import pytest

from leap_jax.env import compile_cache
from leap_jax.env import environment
from leap_jax.env import pool as pool_lib
from leap_jax.env import wire
from leap_jax.env.verdict import Status
from tests.env.conftest import vector_add
from tests.env.test_worker import _run


def _entry(n=8):
  return np.arange(n, dtype=np.uint8)


def test_validate_passes_a_warmers_entries_on():
  header = {"kind": "compile_cache", "names": ["jit_f-abc123", "jit_g-cache"]}
  blob = compile_cache.validate(header, [_entry(), _entry(3)])
  got, arrays = wire.decode(blob, frozenset({"uint8"}))
  assert got["names"] == header["names"]
  np.testing.assert_array_equal(arrays[1], _entry(3))


@pytest.mark.parametrize("names,arrays,why", [
    (["../escape"], [_entry()], "bad cache entry"),
    (["a/b"], [_entry()], "bad cache entry"),
    ([".lockfile"], [_entry()], "bad cache entry"),
    ([""], [_entry()], "bad cache entry"),
    (["ok"], [np.zeros(2, np.float32)], "bad cache entry"),
    (["ok"], [np.zeros((2, 2), np.uint8)], "bad cache entry"),
    (["ok", "ok"], [_entry(), _entry()], "repeated"),
    (["ok"], [], "not a compile-cache message"),
    ([f"e{i}" for i in range(compile_cache.MAX_ENTRIES + 1)],
     [_entry(1)] * (compile_cache.MAX_ENTRIES + 1), "not a compile-cache"),
])
def test_validate_refuses_what_a_cache_never_holds(names, arrays, why):
  with pytest.raises(compile_cache.CacheError, match=why):
    compile_cache.validate({"kind": "compile_cache", "names": names}, arrays)


def test_validate_refuses_entries_over_the_size_cap(monkeypatch):
  monkeypatch.setattr(compile_cache, "MAX_TOTAL_BYTES", 10)
  with pytest.raises(compile_cache.CacheError, match="size cap"):
    compile_cache.validate({"kind": "compile_cache", "names": ["a", "b"]},
                           [_entry(6), _entry(6)])


def test_kept_blob_is_staged_into_scratch_as_files(tmp_path, monkeypatch):
  monkeypatch.setattr(compile_cache, "_BLOB", [])
  assert compile_cache.stage(str(tmp_path)) is None  # nothing kept yet
  blob = compile_cache.validate(
      {"kind": "compile_cache", "names": ["jit_a-1", "jit_b-2"]},
      [_entry(5), _entry(2)])
  compile_cache.keep(compile_cache.to_memfd(blob))
  directory = compile_cache.stage(str(tmp_path))
  assert sorted(os.listdir(directory)) == ["jit_a-1", "jit_b-2"]
  with open(os.path.join(directory, "jit_a-1"), "rb") as f:
    assert f.read() == _entry(5).tobytes()


def test_a_worker_loads_the_warmers_programs_then_has_no_cache(tmp_path):
  """A warmer fills the cache; a second process warms up from it (hits, no
  writes), and afterwards jax's settings and cache state are those of a
  worker without one: a later compile neither reads nor writes it."""
  got = _run(f"""
      import json, os
      import jax, jax.numpy as jnp
      from jax._src import compilation_cache, monitoring
      from leap_jax.env import compile_cache, worker
      hits = []
      monitoring.register_event_listener(
          lambda event, **kw: hits.append(event)
          if event == "/jax/compilation_cache/cache_hits" else None)
      fill = worker.WorkerSetup(fill_compile_cache=True)
      worker.configure_backend(fill)
      cache = compile_cache.cache_dir({str(tmp_path)!r})
      worker.warm_up(fill, cache)
      filled = sorted(os.listdir(cache))
      hits_filling = len(hits)
      before = {{n: getattr(jax.config, n) for n in compile_cache._SETTINGS}}
      # A later worker: its warm-up compiles again (jit caches are per
      # process, so clear them), reading the same directory.
      jax.clear_caches()
      worker._BASELINE.clear()
      worker.warm_up(worker.WorkerSetup(), cache)
      hits_reading = len(hits) - hits_filling
      after = {{n: getattr(jax.config, n) for n in compile_cache._SETTINGS}}
      jax.jit(lambda x: x * 3 + 1)(jnp.ones(7)).block_until_ready()
      print(json.dumps({{
          "filled": len(filled), "hits_filling": hits_filling,
          "hits_reading": hits_reading, "settings_restored": before == after,
          "dir_left": os.path.exists(cache),
          "cache_checked": compilation_cache._cache_checked,
          "cache": compilation_cache._cache is not None,
          "hits_after": len(hits) - hits_filling - hits_reading}}))
      """)
  assert got["filled"] >= 2 and got["hits_filling"] == 0
  assert got["hits_reading"] >= 2
  assert got["settings_restored"] and not got["dir_left"]
  assert got["cache_checked"] and not got["cache"]
  assert got["hits_after"] == 0


def test_pool_shares_the_warm_up_and_later_workers_judge_as_before():
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(num_workers=1,
                                                          deadline_s=30))
  with environment.KernelEnv(config) as env:
    assert env.pool.warm_up_shared.wait(120)
    assert env.pool.warm_up_entries and env.pool.warm_up_entries >= 2
    answers = [vector_add(), vector_add("x_ref[...] * y_ref[...]"),
               vector_add()]
    statuses = [v.status for v in env.evaluate(
        [("level1/vector_add", a) for a in answers])]
  assert statuses == [Status.OK, Status.WRONG_OUTPUT, Status.OK]


def test_pool_without_sharing_says_so_at_once():
  config = environment.EnvConfig(pool=pool_lib.PoolConfig(
      num_workers=1, deadline_s=30, share_warm_up=False))
  with environment.KernelEnv(config) as env:
    assert env.pool.warm_up_shared.is_set()
    assert env.pool.warm_up_entries is None

"""An instance's id and inputs."""

import jax
import jax.numpy as jnp
import numpy as np

from kernels_pallas.generated.instance import Instance, inputs_text


def _instance():
  return Instance(family="ew_chain", combination="mul_y-tanh", shape=(64, 128),
                  inputs=(("x", (64, 128), 1.0), ("y", (128,), 0.5)),
                  description="", reference_text="", candidate_text="",
                  atol=1e-5, rtol=1e-5, level=1)


def test_task_id_says_family_ops_and_shape():
  assert _instance().task_id == "gen/ew_chain/mul_y-tanh/64x128"


def test_make_inputs_shapes_scales_and_independent_keys():
  x, y = _instance().make_inputs(jax.random.key(0))
  assert (x.shape, y.shape) == ((64, 128), (128,))
  assert x.dtype == y.dtype == jnp.float32
  assert 0.8 < float(jnp.std(x)) < 1.2 and 0.3 < float(jnp.std(y)) < 0.7
  x2, _ = _instance().make_inputs(jax.random.key(1))
  assert not np.allclose(x, x2)


def test_inputs_text():
  assert inputs_text(_instance().inputs) == ("x float32 [64, 128], "
                                             "y float32 [128]")

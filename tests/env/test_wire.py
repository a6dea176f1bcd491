import ml_dtypes
import numpy as np
import pytest

from leap_jax.env import wire

DTYPES = frozenset({"float32", "bfloat16", "int32"})


def test_round_trip_keeps_values_and_dtypes():
  arrays = [np.arange(6, dtype=np.float32).reshape(2, 3),
            np.ones(3, ml_dtypes.bfloat16), np.array(7, np.int32)]
  header, out = wire.decode(wire.encode({"kind": "outputs"}, arrays), DTYPES)
  assert header["kind"] == "outputs"
  for a, b in zip(arrays, out):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("message", [
    b"", b"\xff\xff\xff\xff{}", b"\x02\x00\x00\x00{}",
    b"\x0b\x00\x00\x00not json!!!",
    wire.encode({}, [np.ones(2, np.float32)])[:-1],          # truncated
    wire.encode({}, [np.ones(2, np.float32)]) + b"x",        # trailing
    wire.encode({}, [np.ones(2, np.float64)]),               # dtype not allowed
])
def test_malformed_messages_are_rejected(message):
  with pytest.raises(wire.WireError):
    wire.decode(message, DTYPES)


def test_pickle_is_never_used():
  import pickle
  with pytest.raises(wire.WireError):
    wire.decode(pickle.dumps({"kind": "ready"}), DTYPES)


def test_message_cap_fits_exactly_a_full_header_and_the_arrays():
  arrays = [np.ones(1000, np.float32)]
  cap = wire.message_cap(sum(a.nbytes for a in arrays))
  assert len(wire.encode({"kind": "outputs"}, arrays)) <= cap
  assert cap == 4 + wire.MAX_HEADER_BYTES + 4000

"""lax.iota / broadcasted_iota: JAX 0.10.2's error types and words for bad dtypes, shapes
and dimensions (recorded below from JAX 0.10.2; compared beside it where installed)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax

BOOL_MSG = ("iota does not accept dtype bool. Accepted dtypes are subtypes of integer, "
            "floating, complexfloating.")

# (call, exception type, message) as JAX 0.10.2 raises them
BAD = [
    (lambda m: m.iota(np.bool_, 3), TypeError, BOOL_MSG),
    (lambda m: m.iota(bool, 0), TypeError, BOOL_MSG),
    (lambda m: m.broadcasted_iota(np.bool_, (2, 2), 0), TypeError, BOOL_MSG),
    (lambda m: m.iota(np.int32, -1), TypeError,
     "iota shape must have every element be nonnegative, got (-1,)."),
    (lambda m: m.iota(np.bool_, -1), TypeError,  # the shape is checked first
     "iota shape must have every element be nonnegative, got (-1,)."),
    (lambda m: m.broadcasted_iota(np.int32, (3,), 1), ValueError,
     "iota dimension must be between 0 and len(shape), got dimension=1 for shape=(3,)"),
    (lambda m: m.broadcasted_iota(np.int32, (3,), -1), ValueError,  # not wrapped
     "iota dimension must be between 0 and len(shape), got dimension=-1 for shape=(3,)"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_errors_as_recorded_from_jax(i):
    call, exc, msg = BAD[i]
    with pytest.raises(exc) as err:
        call(lax)
    assert str(err.value) == msg


def test_bool_iota_under_jit_raises_the_same():
    with pytest.raises(TypeError) as err:
        plax.jit(lambda: lax.iota(np.bool_, 3))()
    assert str(err.value) == BOOL_MSG


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32, np.complex64])
def test_accepted_dtypes_count(dtype):
    out = lax.broadcasted_iota(dtype, (2, 3), 1)
    assert out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out), np.tile(np.arange(3), (2, 1)))


@pytest.mark.parametrize("i", range(len(BAD)))
def test_errors_beside_jax(i):
    jax = pytest.importorskip("jax")
    call, _, _ = BAD[i]
    with pytest.raises(Exception) as want:
        call(jax.lax)
    with pytest.raises(Exception) as got:
        call(lax)
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)

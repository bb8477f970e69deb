"""A top-level ``jit`` call with NumPy arrays and scalars as arguments, no mesh set: the
first call of a signature takes the general path, which records it; later calls take the
fast path of host arguments (``JitFunction._call_host_leaves``). Whichever path a call
takes, its results are the same -- value, dtype (canonicalised as the x64 flag says), weak
type, device, committedness -- and each NumPy argument is copied: its owner may write to it
after the call without changing a result."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import dtypes, numpy as jnp
from plax.transforms.call import LEND_MIN_BYTES
from plax.transforms.jit import JitFunction


@pytest.fixture
def general_calls(monkeypatch):
    """Counts the calls that take the general path (the others take a fast path)."""
    count = [0]
    general = JitFunction._call_general

    def counting(self, *args, **kwargs):
        count[0] += 1
        return general(self, *args, **kwargs)

    monkeypatch.setattr(JitFunction, "_call_general", counting)
    return count


@pytest.fixture
def x64_set():
    """Sets the x64 flag globally (``config.override`` is thread-local, and a thread's own
    options send every call down the general path), restoring it afterwards."""
    before = plax.config.read("jax_enable_x64")
    yield lambda value: plax.config.update("jax_enable_x64", value)
    plax.config.update("jax_enable_x64", before)


def _takes_fast_path(backend) -> bool:
    """Whether a jit of ``backend`` can take a fast path: it runs on the default device's
    platform (else each call moves to a device of its own, on the general path)."""
    return backend.platform == plax.devices()[0].platform


def _described(x) -> tuple:
    """Everything a caller can tell of a one-device result."""
    return (type(x), x.dtype, x.shape, x.aval.weak_type, x.device, x.committed,
            np.asarray(x).tolist())


# Host arguments: the value, and whether JAX types it weakly (Python scalars but bool)
_HOST = {
    "float64 array": (lambda: np.arange(3.0), False),
    "float32 array": (lambda: np.arange(3, dtype=np.float32), False),
    "int64 array": (lambda: np.arange(3), False),
    "uint8 array": (lambda: np.arange(3, dtype=np.uint8), False),
    "bool array": (lambda: np.array([True, False, True]), False),
    "complex128 array": (lambda: np.arange(3) + 1j, False),
    "0-d float64 array": (lambda: np.array(2.5), False),
    "strided array": (lambda: np.arange(6.0)[::2], False),
    "transposed array": (lambda: np.arange(6, dtype=np.int32).reshape(2, 3).T, False),
    "Python float": (lambda: 2.5, True),
    "Python int": (lambda: 3, True),
    "Python bool": (lambda: True, False),
    "Python complex": (lambda: 1 + 2j, True),
    "NumPy float64 scalar": (lambda: np.float64(1.5), False),
    "NumPy int64 scalar": (lambda: np.int64(7), False),
    "bfloat16 array": (lambda: np.arange(3.0).astype(dtypes.bfloat16), False),
    "bfloat16 scalar": (lambda: dtypes.bfloat16.type(1.5), False),
}
_NARROW = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
           np.dtype(np.complex128): np.dtype(np.complex64)}


def _expected_dtype(x, x64: bool) -> np.dtype:
    dt = np.asarray(x).dtype  # (Python scalars: their 64-bit NumPy type)
    return dt if x64 else _NARROW.get(dt, dt)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("kind", list(_HOST))
def test_fast_path_gives_what_the_general_path_gives(kind, x64, general_calls, x64_set):
    make, weak = _HOST[kind]
    x64_set(x64)
    f = plax.jit(lambda a: (a, a + a))
    first = f(make())
    assert general_calls[0] == 1
    second = f(make())
    assert general_calls[0] == 1  # the fast path
    x = make()
    dtype = _expected_dtype(x, x64)
    want = np.asarray(x).astype(dtype)
    for general, fast in zip(first, second):
        assert _described(fast) == _described(general)
    same, twice = second
    assert (same.dtype, same.aval.weak_type, same.committed) == (dtype, weak, False)
    assert same.device == plax.devices()[0]
    np.testing.assert_array_equal(np.asarray(same), want)
    np.testing.assert_array_equal(np.asarray(twice), want + want)


def test_numpy_argument_written_after_the_call(backend_name, backend, general_calls):
    f = plax.jit(lambda a, b: (a, a * b), backend=backend_name)
    general = 0 if _takes_fast_path(backend) else 1
    for n in (3, LEND_MIN_BYTES // 4):  # copied, then lent to the backend (64 KiB)
        a = np.arange(n, dtype=np.float32)
        b = np.full(n, 2.0)
        f(a, b)
        calls = general_calls[0]
        same, double = f(a, b)
        assert general_calls[0] == calls + general
        a += 1.0  # the caller reuses their buffers
        b[:] = 5.0
        np.testing.assert_array_equal(np.asarray(same), np.arange(n, dtype=np.float32))
        np.testing.assert_array_equal(np.asarray(double), 2.0 * np.arange(n))
        again, _ = f(a, b)
        np.testing.assert_array_equal(np.asarray(again), np.arange(n) + 1.0)
        np.testing.assert_array_equal(np.asarray(same), np.arange(n, dtype=np.float32))


def test_bfloat16_numpy_arguments_on_the_fast_path(backend_name, backend, general_calls):
    f = plax.jit(lambda a, s: (a, a * s), backend=backend_name)
    general = 0 if _takes_fast_path(backend) else 1
    for n in (3, LEND_MIN_BYTES // 2):  # copied, then lent to the backend (64 KiB)
        a = np.arange(n, dtype=np.float32).astype(dtypes.bfloat16)
        s = dtypes.bfloat16.type(2.0)
        first = f(a, s)
        calls = general_calls[0]
        second = f(a, s)
        assert general_calls[0] == calls + general
        for x, y in zip(first, second):
            assert _described(y) == _described(x)
            assert (y.dtype, y.aval.weak_type, y.committed) == (dtypes.bfloat16, False, False)
        a[:] = 7.0  # the caller reuses their buffer: no result changes
        np.testing.assert_array_equal(np.asarray(second[0], np.float32),
                                      np.arange(n, dtype=np.float32).astype(dtypes.bfloat16))
        np.testing.assert_array_equal(np.asarray(second[1], np.float32),
                                      np.arange(n, dtype=np.float32).astype(dtypes.bfloat16)
                                      .astype(np.float32) * 2)


def test_pytree_of_numpy_leaves_and_arrays(backend_name, backend, general_calls):
    f = plax.jit(lambda p, q: {"s": p["w"] * q[0] + p["b"], "t": q[1]}, backend=backend_name)
    general = 0 if _takes_fast_path(backend) else 1
    device = plax.devices()[0]
    params = {"w": np.arange(3.0), "b": jnp.ones(3)}
    for second, committed in ((np.ones(3, np.float32), False),
                              (plax.device_put(jnp.full(3, 2.0), device), True)):
        q = (second, np.int64(4))
        first = f(params, q)
        calls = general_calls[0]
        out = f(params, q)
        assert general_calls[0] == calls + general
        assert {k: _described(v) for k, v in out.items()} == \
            {k: _described(v) for k, v in first.items()}
        np.testing.assert_array_equal(np.asarray(out["s"]),
                                      np.arange(3.0) * np.asarray(second) + 1.0)
        assert out["t"].dtype == np.int32 and out["s"].committed == committed


def test_x64_flag_changed_between_calls(x64_set, general_calls):
    f = plax.jit(lambda a: a * 2)
    x = np.arange(3.0)
    x64_set(False)
    assert f(x).dtype == f(x).dtype == np.float32
    x64_set(True)
    assert f(x).dtype == f(x).dtype == np.float64
    x64_set(False)
    assert f(x).dtype == np.float32
    assert general_calls[0] == 2  # one per flag value; the rest took the fast path


def test_other_leaves_after_a_recorded_signature():
    f = plax.jit(lambda a: a + 1)
    f(np.ones(3, np.float32))
    f(3)
    f(3)
    np.testing.assert_array_equal(np.asarray(f(np.arange(3, dtype=np.int32))), [1, 2, 3])
    with pytest.raises(OverflowError):
        f(2 ** 40)  # beyond int32, on the fast path too
    with pytest.raises(TypeError, match="abstract array"):
        f("text")
    with pytest.raises(TypeError):
        f(np.array(["a", "b"]))


def test_dtypes_and_weak_types_as_jax(x64_set):
    jax = pytest.importorskip("jax")
    for x64 in (False, True):
        jax.config.update("jax_enable_x64", x64)
        x64_set(x64)
        try:
            for kind, (make, _) in _HOST.items():
                fp, fj = plax.jit(lambda a: a * 1), jax.jit(lambda a: a * 1)
                for _ in range(2):  # the general path, then the fast path
                    got, want = fp(make()), fj(make())
                    assert (got.dtype, got.aval.weak_type) == \
                        (want.dtype, want.aval.weak_type), (kind, x64)
                    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        finally:
            jax.config.update("jax_enable_x64", False)

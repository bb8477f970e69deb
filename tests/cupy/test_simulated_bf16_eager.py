"""Eager bfloat16 on the GPU gives the same bits as ``jit`` and as the NumPy backend.

Regression of issue 24's two eager bfloat16 bugs in ``CupyBackend._make_eager`` (both right
under ``jit``): a fusible primitive's eager path widened bfloat16 to float32 before the
generated kernel, so eager ``nextafter`` stepped one float32 unit and rounded back to ``x``;
and eager ``bitcast_convert_type`` reached a bit cast that viewed a 0-d array as a narrower
type, which CuPy refuses ("Changing the dtype of a 0d array ..."). The eager path now hands
bfloat16 to the generated kernel (and to table kernels that take them) as its bits.

The tests need the simulated CuPy, so :func:`test_on_the_simulated_gpu` runs this file in a
child process with ``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


def _bits(x) -> np.ndarray:
    """The bit patterns of a result (as unsigned integers of its width)."""
    a = np.asarray(x)
    return a.view(f"u{a.dtype.itemsize}")


def _three_ways(fn, *host_args):
    """``fn`` eager on the GPU, jitted on the GPU, and eager on the NumPy backend (host)."""
    import plax
    gpu = plax.devices("gpu")[0]
    cpu = plax.devices("cpu")[0]
    on_gpu = plax.device_put(host_args, gpu)
    eager = np.asarray(fn(*on_gpu))
    jitted = np.asarray(plax.jit(fn)(*on_gpu))
    ref = np.asarray(plax.jit(fn, backend="numpy")(*plax.device_put(host_args, cpu)))
    return eager, jitted, ref


def _edges() -> np.ndarray:
    """bfloat16 values with signed zeros, the smallest subnormal, infinities and the largest."""
    v = [0.0, -0.0, 1.0, -1.5, 3.0e38, -3.0e38, 9.2e-41, -9.2e-41, np.inf, -np.inf, 1e-3, 7.0]
    return np.array(v, np.float32).astype(BF16)


def _toward(x: np.ndarray) -> np.ndarray:
    """Directions for each of ``x``: up, down, equal, and infinities."""
    return np.array([1.0, 1.0, 0.0, -np.inf, np.inf, 0.0, -1.0, 1.0, 0.0, 0.0, -np.inf, 7.0],
                    np.float32).astype(BF16)[: x.size].reshape(x.shape)


@on_simulated_gpu
@pytest.mark.parametrize("shape", [(), (12,), (3, 4)], ids=["0d", "1d", "2d"])
def test_nextafter_bfloat16_eager_equals_jit_and_numpy_backend(shape):
    from plax import lax
    x = _edges()[: int(np.prod(shape, dtype=int))].reshape(shape)
    y = _toward(x)
    eager, jitted, ref = _three_ways(lax.nextafter, x, y)
    assert eager.dtype == jitted.dtype == ref.dtype == BF16
    np.testing.assert_array_equal(_bits(eager), _bits(ref))
    np.testing.assert_array_equal(_bits(jitted), _bits(ref))
    if x.size > 1:  # one bfloat16 step, not a float32 one rounded back to x
        assert (_bits(eager) != _bits(x)).sum() == int((x != y).sum())


def _bitcast(dtype):
    from plax import lax
    return lambda x: lax.bitcast_convert_type(x, dtype)


@on_simulated_gpu
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=["0d", "1d", "2d"])
@pytest.mark.parametrize("pair", [
    (np.float32, BF16), (np.int32, BF16), (np.float16, BF16), (BF16, np.int16),
    (BF16, np.float16), (np.uint16, BF16), (BF16, BF16)],
    ids=lambda p: f"{np.dtype(p[0])}->{np.dtype(p[1])}")
def test_bitcast_convert_type_bfloat16_eager_equals_jit_and_numpy_backend(pair, shape):
    src, dst = np.dtype(pair[0]), np.dtype(pair[1])
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 2 ** 16, size=shape + (src.itemsize // 2,), dtype=np.uint16)
    x = raw.view(src).reshape(shape)
    eager, jitted, ref = _three_ways(_bitcast(dst), x)
    want_shape = shape + (src.itemsize // dst.itemsize,) if src.itemsize > dst.itemsize else shape
    assert eager.shape == jitted.shape == ref.shape == want_shape
    assert eager.dtype == jitted.dtype == ref.dtype == dst
    np.testing.assert_array_equal(_bits(eager), _bits(ref))
    np.testing.assert_array_equal(_bits(jitted), _bits(ref))
    np.testing.assert_array_equal(_bits(ref).reshape(-1).view(np.uint16), raw.reshape(-1))


@on_simulated_gpu
def test_bitcast_float32_bfloat16_round_trip_eager():
    from plax import lax
    import plax
    x = plax.device_put(np.float32(-1.7e-3), plax.devices("gpu")[0])
    halves = lax.bitcast_convert_type(x, BF16)
    back = lax.bitcast_convert_type(halves, np.float32)
    assert halves.shape == (2,) and back.shape == ()
    assert _bits(back) == _bits(np.float32(-1.7e-3))

"""The ``fft`` primitive's GPU kernels (``plax_cupy.kernels_fft``) on the simulated GPU (or a
real one) against the NumPy backend's: the four transforms, ranks 1 to 3, batched, every dtype
they take, odd and empty lengths (run by test_kernels_b_simulated.py); and in compiled programs,
on cuFFT plans each program owns (``plax_cupy.fft_plans``): replayed as one CUDA graph whatever
other transforms run between calls, where the plan of CuPy's cache fails the simulation."""
from __future__ import annotations

import numpy as np
import pytest

from plax.lax.fft import FftType, fft_p, fft_result_shape_dtype
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import close

pytestmark = on_a_gpu

COMPLEX = [np.complex64, np.complex128]
REAL = [np.float32, np.float64]
ids = lambda d: np.dtype(d).name  # noqa: E731


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
@pytest.mark.parametrize("fft_type", [FftType.FFT, FftType.IFFT], ids=lambda t: t.name)
@pytest.mark.parametrize("lengths", [(8,), (5,), (4, 6), (3, 4, 5)], ids=str)
def test_complex_transforms(dtype, fft_type, lengths):
    close(fft_p, data((2,) + lengths, dtype), fft_type=fft_type, fft_lengths=lengths, scale=10)
    close(fft_p, data(lengths, dtype), fft_type=fft_type, fft_lengths=lengths, scale=10)


@pytest.mark.parametrize("dtype", REAL, ids=ids)
@pytest.mark.parametrize("lengths", [(8,), (7,), (4, 6), (3, 4, 5)], ids=str)
def test_real_transforms_and_their_inverse(dtype, lengths):
    x = data((3,) + lengths, dtype)
    spectrum = close(fft_p, x, fft_type=FftType.RFFT, fft_lengths=lengths, scale=10)
    assert spectrum.dtype == np.result_type(dtype, np.complex64)
    back = close(fft_p, spectrum, fft_type=FftType.IRFFT, fft_lengths=lengths, scale=10)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-4)
    # a half spectrum not produced by RFFT (imaginary DC and Nyquist parts are dropped)
    half = data((3,) + lengths[:-1] + (lengths[-1] // 2 + 1,), np.result_type(dtype, np.complex64), 1)
    close(fft_p, half, fft_type=FftType.IRFFT, fft_lengths=lengths, scale=10)


def test_empty_transforms():
    close(fft_p, np.zeros((0, 4), np.complex64), fft_type=FftType.FFT, fft_lengths=(4,))
    close(fft_p, np.zeros((2, 0), np.float32), fft_type=FftType.RFFT, fft_lengths=(0,))
    close(fft_p, np.zeros((0, 3), np.complex128), fft_type=FftType.IRFFT, fft_lengths=(4,))


# ---------------------------------------------------------------- in compiled programs

from test_simulated_streams import SIMULATED  # noqa: E402

only_simulated = pytest.mark.skipif(not SIMULATED, reason="checks the simulated CuPy itself")
TOL = {np.dtype(np.complex64): 2e-4, np.dtype(np.float32): 2e-4,
       np.dtype(np.complex128): 1e-10, np.dtype(np.float64): 1e-10}


def _graph_line(executable) -> str:
    return next(line for line in executable.as_text().splitlines()
                if line.startswith("# CUDA graph"))


def _program(kind, dtype):
    """A jitted program of two transforms (every FftType over the four dtypes, 1 to 3 axes,
    batched, one operand a transposed view), its arguments and NumPy's float64 answer."""
    import plax
    from plax import lax
    import plax.numpy as jnp
    if kind == "complex":
        shape = (3, 4, 6) if dtype == np.complex64 else (2, 3, 4, 5)
        k = 2 if dtype == np.complex64 else 3
        x = data(shape, dtype)
        axes = tuple(range(-k, 0))
        swapped = np.swapaxes(x, -1, -2)

        def fn(v):
            return (lax.fft(v, FftType.FFT, shape[-k:]),
                    lax.fft(jnp.swapaxes(v, -1, -2), FftType.IFFT, swapped.shape[-k:]))
        want = [np.fft.fftn(x.astype(np.complex128), axes=axes),
                np.fft.ifftn(swapped.astype(np.complex128), axes=axes)]
        return plax.jit(fn), (x,), want
    lengths = (8,) if dtype == np.float32 else (4, 6)
    x = data((5,) + lengths, dtype)
    half = data((5,) + lengths[:-1] + (lengths[-1] // 2 + 1,), np.result_type(dtype, np.complex64), 1)
    axes = tuple(range(-len(lengths), 0))

    def fn(v, s):
        return lax.fft(v, FftType.RFFT, lengths), lax.fft(s, FftType.IRFFT, lengths)
    want = [np.fft.rfftn(x.astype(np.float64), axes=axes),
            np.fft.irfftn(half.astype(np.complex128), s=lengths, axes=axes)]
    return plax.jit(fn), (x, half), want


@pytest.mark.parametrize("kind,dtype", [("complex", np.complex64), ("complex", np.complex128),
                                        ("real", np.float32), ("real", np.float64)],
                         ids=["FFT-IFFT-complex64", "FFT-IFFT-complex128", "RFFT-IRFFT-float32",
                              "RFFT-IRFFT-float64"])
def test_a_program_holding_fft_replays_as_one_graph(kind, dtype, compiled_programs):
    """Issue 24: a jitted program holding ``fft`` owns its cuFFT plans, so it is captured on the
    second call and replays as one launch from the third, with NumPy's values on every call;
    sixteen and more other (eager, CuPy-cached) transforms between replays do not disturb it,
    and an operand that IRFFT's cuFFT may overwrite is left as it was."""
    import plax
    import plax.numpy as jnp
    import plax_cupy
    f, host, want = _program(kind, dtype)
    gpu = plax.devices("gpu")[0]
    launches = []
    with plax.config.override("jax_enable_x64", True):   # (float64, complex128 kept)
        args = plax.device_put(host, gpu)
        for call in range(6):
            if call == 4:   # other shapes' eager transforms evict CuPy's cached plans
                for n in range(9, 9 + 18):
                    jnp.fft.fft(plax.device_put(np.ones(n, np.complex64), gpu)).block_until_ready()
            with plax_cupy.count() as c:
                out = f(*args)
            launches.append(c.launches)
            got = [np.asarray(o) for o in out]
            del out   # (a result still held keeps its plan from replaying)
            for g, ref in zip(got, want):
                assert g.dtype == (np.result_type(dtype, np.complex64) if ref.dtype.kind == "c"
                                   else np.dtype(dtype))
                np.testing.assert_allclose(g, ref, rtol=TOL[np.dtype(dtype)],
                                           atol=TOL[np.dtype(dtype)] * 10)
        for arg, h in zip(args, host):
            np.testing.assert_array_equal(np.asarray(arg), h)
    assert launches[2:] == [1, 1, 1, 1], launches
    line = _graph_line(compiled_programs[0])
    assert line.startswith("# CUDA graph: captured, ") and "1 captured, 5 replayed, 1 plain" in line, line


def test_empty_transforms_in_a_program():
    """An empty operand in a compiled program: the empty result, no plan made."""
    import plax
    from plax import lax
    gpu = plax.devices("gpu")[0]
    for x, t, n in ((np.zeros((0, 4), np.complex64), FftType.FFT, (4,)),
                    (np.zeros((2, 0), np.float32), FftType.RFFT, (0,)),
                    (np.zeros((0, 3), np.complex128), FftType.IRFFT, (4,))):
        f = plax.jit(lambda v: lax.fft(v * 2, t, n))
        shape, dtype = fft_result_shape_dtype(x.shape, x.dtype, t, n)
        with plax.config.override("jax_enable_x64", True):
            for _ in range(3):
                got = np.asarray(f(plax.device_put(x, gpu)))
                assert got.shape == shape and got.dtype == dtype and not got.any()


@only_simulated
def test_the_cached_plan_path_fails_the_simulation(compiled_programs, monkeypatch):
    """The bug the program's own plans fix, shown by the simulation: a program that captured
    its transform through CuPy's plan cache (the eager kernel) replays on a destroyed plan
    once 16 other transforms evicted it, which the simulated graph refuses."""
    import fake_cupy
    import plax
    import plax.numpy as jnp
    from plax import lax
    from plax_cupy import kernels
    monkeypatch.delitem(kernels.program_impls(), lax.fft_p)   # (the kernel-table path)
    gpu = plax.devices("gpu")[0]
    x = plax.device_put(data((3, 8), np.complex64), gpu)
    f = plax.jit(lambda v: lax.fft(lax.fft(v, FftType.FFT, (8,)), FftType.IFFT, (8,)))
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(x), rtol=1e-5, atol=1e-5)
    assert "1 captured, 2 replayed" in _graph_line(compiled_programs[0])   # (the capture: one)
    for n in range(9, 9 + 16):
        jnp.fft.fft(plax.device_put(np.ones(n, np.complex64), gpu)).block_until_ready()
    with pytest.raises(fake_cupy.UseAfterFreeError, match="stale"):
        f(x)


@only_simulated
def test_a_cufft_plan_is_refused_while_the_stream_captures():
    """cuFFT plans are made before a capture: the simulated ``PlanNd``, a miss of CuPy's plan
    cache and plax's :class:`OwnedPlan` refuse a capturing stream (the capture is
    invalidated); a plan made before is captured, and a replay reads its work area."""
    import cupy
    import fake_cupy
    from plax_cupy.fft_plans import OwnedPlan, PlanCaptureError, plan_layout
    layout = plan_layout((2, 8), "complex64", FftType.FFT, (8,))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        for make in (lambda: cupy.cuda.cufft.PlanNd(*layout.plan_arguments(cupy.cuda.cufft)),
                     lambda: cupy.fft.fft(cupy.ones(23, cupy.complex64))):
            s.begin_capture()
            with pytest.raises(fake_cupy.StreamCaptureError, match="cufftMakePlanMany"):
                make()
            with pytest.raises(fake_cupy.StreamCaptureError, match="Invalidated"):
                s.end_capture()
        s.begin_capture()
        with pytest.raises(PlanCaptureError, match="captures"):
            OwnedPlan(layout)
        s.end_capture()
        x = data((2, 8), np.complex64)
        a = cupy.asarray(x)
        plan = OwnedPlan(layout)
        s.begin_capture()
        y = plan(a)
        graph = s.end_capture()
        graph.launch(s)
        np.testing.assert_allclose(y.get(), np.fft.fft(x), rtol=1e-5, atol=1e-5)
        del plan   # (cufftDestroy, the work area back to the pool)
        with pytest.raises(fake_cupy.UseAfterFreeError):
            graph.launch(s)

"""jnp.fft and lax.fft: values against numpy.fft (float64/complex128), result dtypes against
JAX's rules, gradients against finite differences (RFFT/IRFFT included), vmap against a loop,
jit against eager, cropping and padding through ``n``/``s``, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.lax.fft import FftType
from plax.test_util import check_grads

try:  # JAX, when installed, is the reference for dtypes and exception classes
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # pragma: no cover - depends on the environment
    jax = None

RNG = np.random.default_rng(0)
X3 = RNG.normal(size=(4, 6, 5))
C3 = X3 + 1j * RNG.normal(size=X3.shape)
NORMS = [None, "backward", "ortho", "forward"]


def x64():
    return plax.config.override("enable_x64", True)


def close(got, want, tol=1e-11):
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


# (name, input, kwargs): the plax and numpy functions of one name get the same arguments
VALUE_CASES = [
    ("fft", C3, {}), ("fft", C3, dict(n=8)), ("fft", C3, dict(n=3, axis=1)),
    ("fft", X3, dict(axis=0)), ("ifft", C3, {}), ("ifft", C3, dict(n=9, axis=-2)),
    ("rfft", X3, {}), ("rfft", X3, dict(n=4)), ("rfft", X3, dict(n=11, axis=0)),
    ("irfft", C3, {}), ("irfft", C3, dict(n=7)), ("irfft", C3, dict(n=3, axis=1)),
    ("irfft", C3, dict(n=12, axis=0)), ("hfft", C3, {}), ("hfft", C3, dict(n=5, axis=0)),
    ("ihfft", X3, {}), ("ihfft", X3, dict(n=8, axis=1)),
    ("fft2", C3, {}), ("fft2", C3, dict(s=(3, 8))), ("fft2", C3, dict(axes=(0, 2))),
    ("ifft2", C3, dict(s=(7, 2), axes=(2, 0))), ("rfft2", X3, {}), ("rfft2", X3, dict(s=(4, 4))),
    ("irfft2", C3, {}), ("irfft2", C3, dict(s=(5, 9), axes=(1, 0))),
    ("fftn", C3, {}), ("fftn", C3, dict(s=(2, 3))), ("fftn", C3, dict(axes=(1,))),
    ("fftn", C3, dict(s=(5, 2, 8), axes=(2, 0, 1))), ("ifftn", C3, dict(axes=(0, 2))),
    ("rfftn", X3, {}), ("rfftn", X3, dict(s=(3, 7), axes=(2, 0))),
    ("irfftn", C3, {}), ("irfftn", C3, dict(s=(5, 4), axes=(0, 2))), ("irfftn", C3, dict(axes=(1,))),
]


def _numpy_kwargs(kw):
    """``kw`` with the axes NumPy 2 wants spelled out when only ``s`` is given."""
    if "s" in kw and "axes" not in kw:
        return dict(kw, axes=tuple(range(-len(kw["s"]), 0)))
    return kw


def _id(case):
    name, x, kw = case
    return f"{name}-{x.dtype}-" + ",".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("case", VALUE_CASES, ids=[_id(c) for c in VALUE_CASES])
@pytest.mark.parametrize("norm", NORMS)
def test_values_match_numpy_in_double_precision(case, norm):
    name, x, kw = case
    want = getattr(np.fft, name)(x, **_numpy_kwargs(kw), norm=norm)
    with x64():
        got = getattr(jnp.fft, name)(jnp.asarray(x), **kw, norm=norm)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        close(got, want)


@pytest.mark.parametrize("case", VALUE_CASES[:12], ids=[_id(c) for c in VALUE_CASES[:12]])
def test_single_precision_values(case):
    name, x, kw = case
    x = x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)
    want = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64),
                                 **_numpy_kwargs(kw))
    got = getattr(jnp.fft, name)(jnp.asarray(x), **kw)
    close(got, want, tol=2e-5)


def test_padding_and_cropping_through_n():
    x = jnp.arange(1.0, 5.0)
    # n > length: zeros appended; n < length: the tail dropped
    close(jnp.fft.fft(x, n=6), np.fft.fft(np.r_[1.0, 2, 3, 4, 0, 0]), 1e-6)
    close(jnp.fft.fft(x, n=2), np.fft.fft(np.r_[1.0, 2]), 1e-6)
    assert jnp.fft.rfft(x, n=7).shape == (4,)
    # irfft reads n // 2 + 1 values of its input: cropped or padded
    spec = jnp.fft.rfft(x)
    assert jnp.fft.irfft(spec, n=2).shape == (2,) and jnp.fft.irfft(spec, n=9).shape == (9,)
    close(jnp.fft.irfft(spec, n=4), np.asarray(x), 1e-6)
    close(jnp.fft.irfft(spec, n=9), np.fft.irfft(np.fft.rfft(np.arange(1.0, 5.0)), n=9), 1e-6)
    close(jnp.fft.fftn(jnp.ones((2, 3)), s=(4, 1)),
          np.fft.fftn(np.ones((2, 3)), s=(4, 1), axes=(0, 1)), 1e-6)


# ---------------------------------------------------------------- dtypes

DTYPE_CASES = [  # (function, input dtype, x64, expected dtype) -- JAX's results
    ("fft", "float32", False, "complex64"), ("fft", "int32", False, "complex64"),
    ("fft", "bool", False, "complex64"), ("fft", "float16", False, "complex64"),
    ("fft", "uint8", False, "complex64"), ("ifft", "complex64", False, "complex64"),
    ("rfft", "float32", False, "complex64"), ("rfft", "int32", False, "complex64"),
    ("irfft", "complex64", False, "float32"), ("irfft", "float32", False, "float32"),
    ("irfft", "int32", False, "float32"), ("hfft", "complex64", False, "float32"),
    ("ihfft", "float32", False, "complex64"), ("fftn", "float32", False, "complex64"),
    ("rfftn", "float32", False, "complex64"), ("irfftn", "complex64", False, "float32"),
    ("fft", "float64", True, "complex128"), ("fft", "int64", True, "complex128"),
    ("fft", "int32", True, "complex64"), ("rfft", "float64", True, "complex128"),
    ("rfft", "int16", True, "complex64"), ("irfft", "complex128", True, "float64"),
    ("hfft", "int64", True, "float64"), ("ihfft", "float64", True, "complex128"),
    ("fft", "complex128", False, "complex64"),  # canonicalised without x64
]


@pytest.mark.parametrize("name,dtype,wide,expected", DTYPE_CASES)
def test_result_dtypes_follow_jax(name, dtype, wide, expected):
    x = np.ones((3, 4), dtype)
    with plax.config.override("enable_x64", wide):
        got = getattr(jnp.fft, name)(x)
    assert got.dtype == np.dtype(expected)
    if jax is not None:
        old = jax.config.read("jax_enable_x64")
        jax.config.update("jax_enable_x64", wide)
        try:
            assert jax.eval_shape(getattr(jax_numpy.fft, name), x).dtype == np.dtype(expected)
        finally:
            jax.config.update("jax_enable_x64", old)


@pytest.mark.parametrize("fft_type,dtype,lengths,shape,out_dtype", [
    ("FFT", "complex64", (4,), (3, 4), "complex64"),
    ("IFFT", "complex128", (3, 4), (3, 4), "complex128"),
    ("RFFT", "float32", (3, 4), (3, 3), "complex64"),
    ("RFFT", "float64", (4,), (3, 3), "complex128"),
    ("IRFFT", "complex64", (3, 6), (3, 6), "float32"),
    ("IRFFT", "complex128", (5,), (3, 5), "float64"),
])
def test_primitive_abstract_eval(fft_type, dtype, lengths, shape, out_dtype):
    from plax.core.shaped_array import ShapedArray
    in_shape = {"IRFFT": (3, lengths[-1] // 2 + 1) if len(lengths) == 1 else (3, 4)}.get(
        fft_type, (3, 4))
    out = lax.fft_p.abstract_eval(ShapedArray(in_shape, np.dtype(dtype)),
                                  fft_type=FftType[fft_type], fft_lengths=lengths)
    assert (out.shape, out.dtype) == (shape, np.dtype(out_dtype))


def test_lax_fft_converts_and_accepts_names():
    assert lax.fft(np.ones(4, np.int32), "fft", (4,)).dtype == np.complex64
    assert lax.fft(np.ones(4, np.float32), FftType.RFFT, (4,)).shape == (3,)
    x = np.ones(4, np.float32)
    assert lax.fft(x, "IFFT", ()).dtype == np.complex64  # no axes: converted, not transformed
    close(lax.fft(x, "FFT", [4]), np.fft.fft(x.astype(np.float64)), 1e-6)


def test_jaxpr_prints_the_fft_equation():
    text = str(plax.make_jaxpr(lambda x: lax.fft(x, "RFFT", (8,)))(np.ones(8, np.float32)))
    assert "c64[5] = fft[fft_lengths=(8,) fft_type=2]" in text


# ---------------------------------------------------------------- gradients

GRAD_FUNS = [
    ("fft", lambda x: jnp.fft.fft(x), (3, 4)),
    ("ifft n", lambda x: jnp.fft.ifft(x, n=6, axis=0), (3, 4)),
    ("rfft", lambda x: jnp.fft.rfft(x), (3, 8)),
    ("rfft odd n ortho", lambda x: jnp.fft.rfft(x, n=5, norm="ortho"), (3, 4)),
    ("irfft", lambda x: jnp.fft.irfft(x), (2, 5)),
    ("irfft odd n", lambda x: jnp.fft.irfft(x, n=7, axis=0), (4, 3)),
    ("rfft2", lambda x: jnp.fft.rfft2(x, norm="forward"), (3, 4)),
    ("irfftn", lambda x: jnp.fft.irfftn(x, s=(3, 6)), (3, 4)),
    ("hfft", lambda x: jnp.fft.hfft(x), (5,)),
    ("ihfft", lambda x: jnp.fft.ihfft(x), (6,)),
    ("real loss of rfft", lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2), (7,)),
    ("irfft(rfft)", lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * jnp.arange(1.0, 5.0), n=6), (6,)),
]


_REAL_ONLY = ("rfft", "ihfft", "real loss", "irfft(rfft")  # rfft takes real input
GRAD_PARAMS = [pytest.param(name, f, shape, dtype, id=f"{name}-{dtype}")
               for name, f, shape in GRAD_FUNS for dtype in ("float32", "complex64")
               if dtype == "float32" or not name.startswith(_REAL_ONLY)]


@pytest.mark.parametrize("name,f,shape,dtype", GRAD_PARAMS)
def test_grads_match_finite_differences(name, f, shape, dtype):
    x = RNG.uniform(-1, 1, shape)
    if dtype == "complex64":
        x = x + 1j * RNG.uniform(-1, 1, shape)
    check_grads(f, (jnp.asarray(x.astype(dtype)),), order=2, modes=("fwd", "rev"))


def test_grad_of_power_spectrum_is_parseval():
    # sum |fft(x)|^2 = n * sum x^2, whose gradient is 2 n x
    x = RNG.normal(size=8)
    g = plax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2))(jnp.asarray(x, np.float32))
    close(g, 2 * 8 * x, 1e-4)


@pytest.mark.parametrize("fft_type,shape,lengths", [
    ("RFFT", (3, 8), (8,)), ("RFFT", (2, 3, 5), (3, 5)), ("IRFFT", (3, 5), (8,)),
    ("IRFFT", (3, 4), (3, 7)), ("FFT", (2, 4), (2, 4)), ("IFFT", (3, 4), (4,))])
def test_vjp_is_the_transpose_of_the_jvp(fft_type, shape, lengths):
    dt = np.float64 if fft_type == "RFFT" else np.complex128
    x = RNG.normal(size=shape).astype(dt)
    if dt == np.complex128:
        x = x + 1j * RNG.normal(size=shape)
    with x64():
        f = lambda a: lax.fft_p.bind(a, fft_type=FftType[fft_type], fft_lengths=lengths)  # noqa: E731
        t = RNG.normal(size=shape) + (1j * RNG.normal(size=shape) if dt == np.complex128 else 0)
        out, jt = plax.jvp(f, (jnp.asarray(x),), (jnp.asarray(t.astype(dt)),))
        ct = RNG.normal(size=out.shape) + (1j * RNG.normal(size=out.shape)
                                           if np.iscomplexobj(np.asarray(out)) else 0)
        ct = ct.astype(out.dtype)
        (vt,) = plax.vjp(f, jnp.asarray(x))[1](jnp.asarray(np.conj(ct)))
        # JAX's convention: Re <t, vjp(conj ct)> = Re <jvp(t), ct>, without conjugating t
        lhs = np.sum(t * np.asarray(vt)).real
        rhs = np.sum(np.asarray(jt) * np.conj(ct)).real
        assert abs(lhs - rhs) < 1e-9 * max(1, abs(lhs))


# ---------------------------------------------------------------- vmap and jit

VMAP_FUNS = [  # (id, function of one example, dtype, example shape)
    ("fft", lambda x: jnp.fft.fft(x, n=5), "complex64", (4, 2)),
    ("rfft", lambda x: jnp.fft.rfft(x, axis=0), "float32", (4, 2)),
    ("irfft", lambda x: jnp.fft.irfft(x, n=6), "complex64", (4, 2)),
    ("rfft2", lambda x: jnp.fft.rfft2(x), "float32", (4, 2)),
    ("ifftn", lambda x: jnp.fft.ifftn(x, axes=(1, 0)), "complex64", (4, 2)),
    ("hfft", lambda x: jnp.fft.hfft(x, axis=0, norm="ortho"), "complex64", (4, 2)),
    ("fftshift", lambda x: jnp.fft.fftshift(x, axes=1), "float32", (4, 3)),
    ("lax RFFT", lambda x: lax.fft(x, "RFFT", (3, 4)), "float32", (3, 4)),
    ("lax IRFFT", lambda x: lax.fft(x, "IRFFT", (3, 6)), "complex64", (3, 4)),
    ("lax FFT", lambda x: lax.fft(x, "FFT", (4,)), "complex64", (3, 4)),
]


@pytest.mark.parametrize("name,f,dtype,shape", VMAP_FUNS, ids=[v[0] for v in VMAP_FUNS])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_matches_loop_and_jit_matches_eager(name, f, dtype, shape, axis):
    xs = RNG.normal(size=(3,) + shape)
    if dtype == "complex64":
        xs = xs + 1j * RNG.normal(size=xs.shape)
    xs = xs.astype(dtype)
    moved = np.moveaxis(xs, 0, axis)
    want = np.stack([np.asarray(f(jnp.asarray(x))) for x in xs])
    close(plax.vmap(f, in_axes=axis)(jnp.asarray(moved)), want, 1e-5)
    close(plax.jit(plax.vmap(f, in_axes=axis))(jnp.asarray(moved)), want, 1e-5)
    close(plax.jit(f)(jnp.asarray(xs[0])), want[0], 1e-6)


def test_grad_under_jit_and_vmap():
    xs = RNG.normal(size=(3, 8)).astype(np.float32)
    loss = lambda x: jnp.sum(jnp.fft.irfft(jnp.fft.rfft(x) ** 2, n=8))  # noqa: E731
    want = np.stack([np.asarray(plax.grad(loss)(jnp.asarray(x))) for x in xs])
    close(plax.jit(plax.vmap(plax.grad(loss)))(jnp.asarray(xs)), want, 1e-5)


# ---------------------------------------------------------------- helpers

@pytest.mark.parametrize("n,d", [(8, 1.0), (7, 0.5), (1, 2.0)])
def test_fftfreq_and_rfftfreq(n, d):
    with x64():
        close(jnp.fft.fftfreq(n, d), np.fft.fftfreq(n, d))
        close(jnp.fft.rfftfreq(n, d), np.fft.rfftfreq(n, d))
    assert jnp.fft.fftfreq(n, d).dtype == np.float32
    assert jnp.fft.fftfreq(8, dtype=np.int32).dtype == np.int32  # as JAX: cast after dividing
    assert jnp.fft.rfftfreq(8, dtype=np.int32).dtype == np.float32  # as JAX: a true division
    close(plax.jit(lambda d: jnp.fft.fftfreq(6, d))(2.0), np.fft.fftfreq(6, 2.0), 1e-6)



def test_frequencies_of_an_empty_transform():
    # NumPy divides by zero here; JAX gives no frequencies, and 0 / 0 for rfftfreq's one
    assert jnp.fft.fftfreq(0).shape == (0,)
    assert np.isnan(np.asarray(jnp.fft.rfftfreq(0))).all()


@pytest.mark.parametrize("axes", [None, 0, 1, (1,), (0, 1), (-1, 0)])
def test_fftshift_and_ifftshift(axes):
    x = np.arange(15).reshape(3, 5)
    np.testing.assert_array_equal(jnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(x, axes), axes), x)


def test_empty_batch_and_length_one():
    assert jnp.fft.fft(jnp.ones((0, 3))).shape == (0, 3)
    assert jnp.fft.rfft(jnp.ones((2, 0, 4))).shape == (2, 0, 3)
    close(jnp.fft.fft(jnp.ones(1)), np.ones(1, complex), 1e-7)
    assert jnp.fft.irfft(jnp.ones(1, np.complex64)).shape == (0,)  # n = 2 * (1 - 1), as JAX


# ---------------------------------------------------------------- bad input

BAD = [  # (id, call on a numpy-like module M, exception class, message pattern)
    ("n_zero", lambda M: M.fft.fft(np.ones(4), n=0), ValueError, "positive"),
    ("n_negative", lambda M: M.fft.rfft(np.ones(4), n=-2), ValueError, "positive"),
    ("axis_out_of_bounds", lambda M: M.fft.fft(np.ones(4), axis=2), ValueError, "axis 2"),
    ("rank_0", lambda M: M.fft.fft(np.float32(1)), ValueError, "axis -1"),
    ("norm", lambda M: M.fft.fft(np.ones(4), norm="sideways"), ValueError, "sideways"),
    ("repeated_axes", lambda M: M.fft.fftn(np.ones((2, 3)), axes=(0, 0)), ValueError, "repeated"),
    ("s_axes_lengths", lambda M: M.fft.fftn(np.ones((2, 3)), s=(2, 3), axes=(0,)), ValueError,
     "different lengths"),
    ("s_too_long", lambda M: M.fft.fftn(np.ones((2, 3)), s=(2, 3, 4)), ValueError, r"\(2, 3, 4\)"),
    ("fft2_three_axes", lambda M: M.fft.fft2(np.ones((2, 3, 4)), axes=(0, 1, 2)), ValueError,
     "2 axes"),
    ("fft_two_axes", lambda M: M.fft.fft(np.ones((2, 3)), axis=(0, 1)), ValueError, "multiple"),
    ("rfft_complex", lambda M: M.fft.rfft(np.ones(4, np.complex64)), ValueError, "real"),
    ("rfft_float16", lambda M: M.fft.rfft(np.ones(4, np.float16)), ValueError, "float16"),
    ("fft_list", lambda M: M.fft.fft([1.0, 2.0]), TypeError, "list|fft"),
    ("fftfreq_list", lambda M: M.fft.fftfreq([4]), ValueError, "only takes an int"),
    ("fftfreq_d_list", lambda M: M.fft.rfftfreq(4, d=[1.0]), ValueError, "single value"),
]


@pytest.mark.parametrize("call,exc,pattern", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_jax_exception(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(jnp)
    if jax is not None:
        with pytest.raises(exc):
            call(jax_numpy)


LAX_BAD = [
    ("bad_name", lambda L: L.fft(np.ones(4, np.float32), "sideways", (4,)), ValueError, "sideways"),
    ("bad_type", lambda L: L.fft(np.ones(4, np.float32), 3, (4,)), TypeError, "3"),
    ("rfft_complex", lambda L: L.fft(np.ones(4, np.complex64), "RFFT", (4,)), ValueError, "real"),
    ("rfft_float16", lambda L: L.fft(np.ones(4, np.float16), "RFFT", (4,)), ValueError, "float16"),
    ("lengths_mismatch", lambda L: L.fft(np.ones(8, np.float32), "RFFT", (4,)), ValueError,
     r"\(8,\).*\(4,\)"),
    ("too_many_lengths", lambda L: L.fft(np.ones(8, np.complex64), "FFT", (2, 8)), ValueError,
     r"\(8,\).*\(2, 8\)"),
]


@pytest.mark.parametrize("call,exc,pattern", [b[1:] for b in LAX_BAD], ids=[b[0] for b in LAX_BAD])
def test_lax_fft_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(lax)
    if jax is not None:
        with pytest.raises(exc):
            call(jax.lax)


def test_irfft_input_length_must_fit_the_last_length():
    with pytest.raises(ValueError, match=r"\(8,\).*\(2,\)"):
        lax.fft(np.ones(8, np.complex64), "IRFFT", (3,))


# ---------------------------------------------------------------- docs

def test_traced_length_needs_static_argnums():
    from plax.errors import TracerIntegerConversionError
    with pytest.raises(TracerIntegerConversionError):
        plax.jit(lambda x, n: jnp.fft.fft(x, n))(jnp.ones(4), 3)
    out = plax.jit(lambda x, n: jnp.fft.fft(x, n), static_argnums=1)(jnp.ones(4), 3)
    close(out, np.fft.fft(np.ones(3)), 1e-7)

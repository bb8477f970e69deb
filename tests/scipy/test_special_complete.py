"""The rest of jax.scipy.special in plax (fresnel, sici, wofz, owens_t, hyp2f1, sph_harm_y)
against scipy.special in float64: values over representative domains with edge cases, float32,
jit and vmap, and gradients against finite differences."""
import numpy as np
import pytest
import scipy.special as sps

import plax
from plax.scipy import special as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(12)
INF, NAN = np.inf, np.nan


def _close(actual, expected, rtol, atol=0.0):
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=atol,
                                   equal_nan=True)


def _same_specials(actual, expected):
    """NaN where the reference is NaN, the same infinities and signed zeros where it has them."""
    actual = np.asarray(actual)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    special = np.isinf(expected) | (expected == 0)
    np.testing.assert_array_equal(actual[special], expected[special])


# -- fresnel and sici: two outputs of one real argument -------------------------------------

PAIRS = [("fresnel", ps.fresnel, sps.fresnel, 10.0,
          np.array([0.0, -0.0, 1e-300, 1.5, 1.5000001, -3.0, 1e5, 1e10, INF, -INF, NAN])),
         ("sici", ps.sici, sps.sici, 60.0,
          np.array([0.0, -0.0, 1e-300, 4.0, 3.9999999, -3.0, 1e5, 1e10, 1e300, INF, -INF, NAN]))]


@pytest.mark.parametrize("name,fn,ref,span,edge", PAIRS, ids=[p[0] for p in PAIRS])
def test_pair_values(name, fn, ref, span, edge):
    for shape in [(), (7,), (3, 5)]:
        x = R.uniform(-span, span, size=shape)
        out = fn(x)
        expected = ref(x)
        for got, want in zip(out, expected):
            assert got.dtype == np.float64 and got.shape == shape
            # Ci has a root near 0.6165 and oscillating roots: absolute error there
            _close(got, want, rtol=1e-13, atol=1e-15)
    for got, want in zip(fn(edge), ref(edge)):
        _close(got, want, rtol=1e-13, atol=1e-15)
        _same_specials(got, want)
    x = R.uniform(-span, span, size=(6,))
    for got, want in zip(plax.jit(fn)(x), fn(x)):
        _close(got, np.asarray(want), 1e-15)
    for got, want in zip(plax.vmap(fn)(x), fn(x)):
        _close(got, np.asarray(want), 1e-15)


@pytest.mark.parametrize("name,fn,ref", [(p[0], p[1], p[2]) for p in PAIRS],
                         ids=[p[0] for p in PAIRS])
def test_pair_float32(name, fn, ref):
    with plax.config.override("jax_enable_x64", False):
        x = np.linspace(-9, 9, 301, dtype=np.float32)
        for got, want in zip(fn(x), ref(x.astype(np.float64))):
            assert got.dtype == np.float32
            _close(got, want, rtol=2e-6, atol=1e-6)  # Ci: cancellation in its series
        assert fn(np.int32(2))[0].dtype == np.float32


@pytest.mark.parametrize("name,fn", [(p[0], p[1]) for p in PAIRS], ids=[p[0] for p in PAIRS])
def test_pair_grads(name, fn):
    for x in (0.3, 1.49, 2.7, -5.2, 12.5):
        check_grads(lambda v: fn(v)[0], (np.float64(x),), order=2)
        check_grads(lambda v: fn(v)[1], (np.float64(x),), order=1)


def test_pair_complex_rejected():
    for fn in (ps.fresnel, ps.sici):
        with pytest.raises(TypeError, match="complex"):
            fn(1.0 + 1.0j)


# -- wofz ------------------------------------------------------------------------------------

def test_wofz_values():
    for shape in [(), (9,), (4, 5)]:
        z = R.uniform(-12, 12, size=shape) + 1j * R.uniform(-4, 12, size=shape)
        out = ps.wofz(z)
        assert out.dtype == np.complex128 and out.shape == shape
        ref = sps.wofz(z)
        np.testing.assert_array_less(np.abs(np.asarray(out) - ref), 5e-14 * np.abs(ref))
    # every region: the rational expansion (|z| < 8), the continued fraction, the lower half
    # plane, the real and imaginary axes and their neighbourhood
    r = np.concatenate([R.uniform(0, 8, 400), R.uniform(8, 1e3, 200)])
    t = R.uniform(-np.pi / 3, np.pi, r.size)
    z = np.concatenate([r * np.exp(1j * t), [1e-20 + 1e-20j, 3.0 + 1e-12j, -5.0 - 0.5j, 0.1j,
                                             -7.99j, 8.0 + 0j, 1e10 + 1e10j, 1e-300 + 0j]])
    ref = sps.wofz(z)
    out = np.asarray(ps.wofz(z))
    finite = np.isfinite(ref)
    np.testing.assert_array_less(np.abs(out - ref)[finite], 5e-14 * np.abs(ref)[finite])
    # overflow in the lower half plane: the same signed infinities
    np.testing.assert_array_equal(out[~finite], ref[~finite])
    big = np.array([10 - 30j, 1 - 28j, -40j, 5 - 26j, 30 - 30j])
    np.testing.assert_array_equal(np.isinf(np.asarray(ps.wofz(big))), np.isinf(sps.wofz(big)))


def test_wofz_real_axis_and_limits():
    x = np.concatenate([R.uniform(-30, 30, 50), [0.0, 1e-8, 5.0, 27.0, 1e5, -1e10]])
    out = np.asarray(ps.wofz(x))
    assert out.dtype == np.complex128
    ref = sps.wofz(x.astype(np.complex128))
    _close(out.real, ref.real, rtol=1e-14, atol=0)  # exp(-x^2) exactly, even where tiny
    _close(out.imag, ref.imag, rtol=1e-13)
    z = np.array([complex(0, -INF), complex(1, -INF), complex(INF, -1), complex(INF, INF),
                  complex(0, INF), complex(-INF, 0), complex(INF, -INF), complex(-INF, 2),
                  complex(2, INF), complex(NAN, 1), complex(1, NAN)])
    out, ref = np.asarray(ps.wofz(z)), sps.wofz(z)
    for part in ("real", "imag"):
        got, want = getattr(out, part), getattr(ref, part)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_wofz_float32_and_transforms():
    with plax.config.override("jax_enable_x64", False):
        z = (R.uniform(-10, 10, 200) + 1j * R.uniform(-2, 10, 200)).astype(np.complex64)
        out = ps.wofz(z)
        assert out.dtype == np.complex64
        ref = sps.wofz(z.astype(np.complex128))
        np.testing.assert_array_less(np.abs(np.asarray(out) - ref), 2e-6 * np.abs(ref) + 1e-30)
        assert ps.wofz(np.float32(1.0)).dtype == np.complex64
        assert ps.wofz(1).dtype == np.complex64
    z = R.uniform(-9, 9, 6) + 1j * R.uniform(0, 9, 6)
    _close(plax.jit(ps.wofz)(z), np.asarray(ps.wofz(z)), 1e-15)
    _close(plax.vmap(ps.wofz)(z), np.asarray(ps.wofz(z)), 1e-15)


def test_wofz_grads():
    # w is analytic: d/dx and d/dy of z = x + iy give w' and i w'; both against differences
    for x, y in [(0.5, 0.3), (2.0, 1.0), (-3.0, 0.5), (9.0, 2.0), (1.5, 0.0)]:
        for part in (np.real, np.imag):
            f = lambda x, y: part(ps.wofz(plax.lax.complex(x, y)))  # noqa: E731
            check_grads(f, (np.float64(x), np.float64(y)), order=1)
    z = 1.2 + 0.7j
    wp = 2j / np.sqrt(np.pi) - 2 * z * sps.wofz(z)
    _close(plax.grad(lambda x: ps.wofz(x).real)(1.2),
           (2j / np.sqrt(np.pi) - 2.4 * sps.wofz(1.2)).real, 1e-13)
    _close(plax.jvp(ps.wofz, (z,), (1.0 + 0j,))[1], wp, 1e-13)


# -- owens_t ---------------------------------------------------------------------------------

def test_owens_t_values():
    for hs, as_ in [(3, 1), (3, 10), (30, 1), (30, 50), (0.1, 100)]:
        h = R.uniform(-hs, hs, 300)
        a = R.uniform(-as_, as_, 300)
        ref = sps.owens_t(h, a)
        # SciPy's own accuracy (Patefield-Tandy) is about 2e-13 relative in places
        _close(ps.owens_t(h, a), ref, rtol=1e-12)
    h = np.array([0.0, -1.0, INF, 1.0, NAN, 3.0, 0.0, 2.0, -INF, 0.5, 0.5, 0.0, 40.0])
    a = np.array([1.0, 2.0, 1.0, INF, 1.0, -2.0, INF, -INF, INF, NAN, 0.0, -3.0, 0.5])
    out, ref = ps.owens_t(h, a), sps.owens_t(h, a)
    _close(out, ref, rtol=1e-13)
    _same_specials(out, ref)
    _close(ps.owens_t(0.0, a[:4]), np.arctan(a[:4]) / (2 * np.pi), rtol=1e-14)
    assert ps.owens_t(np.ones((2, 1)), np.ones(3)).shape == (2, 3)


def test_owens_t_float32_transforms_grads():
    with plax.config.override("jax_enable_x64", False):
        h = R.uniform(-5, 5, 100).astype(np.float32)
        a = R.uniform(-5, 5, 100).astype(np.float32)
        out = ps.owens_t(h, a)
        assert out.dtype == np.float32
        _close(out, sps.owens_t(h.astype(np.float64), a.astype(np.float64)), rtol=2e-5,
               atol=1e-7)
    h, a = R.uniform(-3, 3, 5), R.uniform(-3, 3, 5)
    _close(plax.jit(ps.owens_t)(h, a), np.asarray(ps.owens_t(h, a)), 1e-15)
    _close(plax.vmap(ps.owens_t)(h, a), np.asarray(ps.owens_t(h, a)), 1e-15)
    for h, a in [(0.5, 1.2), (-2.0, 0.4), (1.0, -3.0), (0.0, 0.7)]:
        check_grads(ps.owens_t, (np.float64(h), np.float64(a)), order=2)


# -- hyp2f1 ----------------------------------------------------------------------------------

def _hyp2f1_sample(n, par, xs):
    return (R.uniform(*par, n), R.uniform(*par, n), R.uniform(0.5, 6.0, n), R.uniform(*xs, n))


@pytest.mark.parametrize("par,xs,rtol", [
    ((0.0, 3.0), (-0.9, 0.75), 1e-13),    # the series itself (after Pfaff for x < 0)
    ((0.0, 3.0), (0.75, 0.999), 1e-11),   # the 1 - z connection formula
    ((-4.0, 4.0), (-20.0, -1.0), 1e-11),  # Pfaff, then either
    ((0.0, 6.0), (-0.5, 0.99), 1e-10),    # larger parameters: cancellation in the formula
])
def test_hyp2f1_values(par, xs, rtol):
    a, b, c, x = _hyp2f1_sample(200, par, xs)
    _close(ps.hyp2f1(a, b, c, x), sps.hyp2f1(a, b, c, x), rtol=rtol)


def test_hyp2f1_special_cases():
    # c - a - b an integer (the limit of the connection formula), near-integers, polynomials,
    # x = 1 (Gauss), x > 1, c a non-positive integer, zeros and NaN
    a = np.array([1.0, 0.5, 1.0, 2.0, 1.5, 1.0, 1.0, -3.0, -3.0, -2.0, 0.0, 1.0, 0.5, 1.0, 2.0,
                  NAN, 1.0, 0.5])
    b = np.array([1.0, 0.5, 2.0, 1.0, 0.5, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.5, 2.0, 3.0,
                  1.0, 1.0, 1.5])
    c = np.array([2.0, 2.0, 3.0, 5.0, 2.0, 2 + 1e-5, 2 - 1e-4, 1.5, 1.5, 4.0, -2.0, 3.0, 2.5,
                  3.0, -1.0, 1.0, 2.0, 2.5])
    x = np.array([0.9, 0.8, 0.7, 0.99, -3.0, 0.95, 0.95, 5.0, -7.0, 0.5, 0.5, 1.0, 1.0, 1.0,
                  0.2, 0.5, 1.1, 0.0])
    out, ref = ps.hyp2f1(a, b, c, x), sps.hyp2f1(a, b, c, x)
    real = (x <= 1) | (a == np.floor(a)) & (a <= 0)
    _close(out[real], ref[real], rtol=1e-11)
    _same_specials(out[real], ref[real])
    # x > 1 off the polynomials: the real function has a branch cut there (SciPy gives inf)
    assert np.isnan(out[~real]).all()


def test_hyp2f1_float32_transforms():
    with plax.config.override("jax_enable_x64", False):
        a, b, c, x = (v.astype(np.float32) for v in _hyp2f1_sample(100, (0.0, 3.0), (-3, 0.99)))
        out = ps.hyp2f1(a, b, c, x)
        assert out.dtype == np.float32
        ref = sps.hyp2f1(*(v.astype(np.float64) for v in (a, b, c, x)))
        _close(out, ref, rtol=1e-4)
    a, b, c, x = _hyp2f1_sample(5, (0.0, 2.0), (-1, 0.9))
    _close(plax.jit(ps.hyp2f1)(a, b, c, x), np.asarray(ps.hyp2f1(a, b, c, x)), 1e-15)
    _close(plax.vmap(ps.hyp2f1)(a, b, c, x), np.asarray(ps.hyp2f1(a, b, c, x)), 1e-15)


def test_hyp2f1_grads():
    for args in [(0.5, 1.5, 2.5, 0.3), (0.5, 1.5, 2.5, 0.85), (1.2, 0.7, 3.1, -2.0)]:
        check_grads(ps.hyp2f1, tuple(np.float64(v) for v in args), order=1, modes=("rev",),
                    rtol=1e-5)
        a, b, c, x = args
        # d/dx 2F1(a, b; c; x) = a b / c 2F1(a + 1, b + 1; c + 1; x)
        _close(plax.grad(ps.hyp2f1, 3)(a, b, c, x), a * b / c * sps.hyp2f1(a + 1, b + 1, c + 1, x),
               rtol=1e-11)


# -- sph_harm_y ------------------------------------------------------------------------------

def test_sph_harm_y_values():
    size = 400
    n = R.integers(0, 25, size)
    m = R.integers(-27, 27, size)
    theta = R.uniform(0, np.pi, size)
    phi = R.uniform(0, 2 * np.pi, size)
    theta[:4] = [0.0, np.pi, np.pi / 2, 0.0]
    out = ps.sph_harm_y(n, m, theta, phi)
    assert out.dtype == np.complex128
    ref = sps.sph_harm_y(n, m, theta, phi)
    np.testing.assert_array_less(np.abs(np.asarray(out) - ref), 1e-13 * np.maximum(np.abs(ref), 1))
    # broadcasting (JAX takes 1-D arrays only), and degrees clipped to n_max as in JAX
    grid = ps.sph_harm_y(np.arange(4)[:, None], 1, theta[None, :5], phi[None, :5])
    assert grid.shape == (4, 5)
    clipped = ps.sph_harm_y(np.array([5]), np.array([1]), theta[:1], phi[:1], n_max=3)
    _close(clipped, sps.sph_harm_y(3, 1, theta[:1], phi[:1]), 1e-13)


def test_sph_harm_y_transforms_and_errors():
    n, m = np.array([2, 3, 4]), np.array([1, -2, 4])
    theta, phi = R.uniform(0, np.pi, 3), R.uniform(0, 2 * np.pi, 3)
    f = plax.jit(lambda t, p: ps.sph_harm_y(n, m, t, p, n_max=4))
    _close(f(theta, phi), sps.sph_harm_y(n, m, theta, phi), 1e-13)
    g = plax.vmap(lambda t: ps.sph_harm_y(n, m, t, phi, n_max=4))
    _close(g(np.stack([theta, theta])), np.stack([sps.sph_harm_y(n, m, theta, phi)] * 2), 1e-13)
    with pytest.raises(Exception, match="n_max"):
        plax.jit(lambda k: ps.sph_harm_y(k, 1, 0.3, 0.7))(2)
    with pytest.raises(NotImplementedError):
        ps.sph_harm_y(2, 1, 0.3, 0.7, diff_n=1)
    with plax.config.override("jax_enable_x64", False):
        out = ps.sph_harm_y(n, m, theta.astype(np.float32), phi.astype(np.float32))
        assert out.dtype == np.complex64
        _close(out, sps.sph_harm_y(n, m, theta, phi), 2e-5, atol=1e-6)
    for part in (np.real, np.imag):
        check_grads(lambda t, p: part(ps.sph_harm_y(n, m, t, p, n_max=4)), (theta, phi),
                    order=1)


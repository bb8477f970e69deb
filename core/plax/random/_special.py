"""The inverse error function the way JAX's compiler evaluates it (M. Giles' approximation).

``plax.lax.erf_inv`` is accurate to the last bit, but JAX's own ``erf_inv`` is
a polynomial approximation (M. Giles, "Approximating the erfinv function",
GPU Computing Gems Jade Edition, 2011) whose error near ``|x| -> 1`` reaches
a few parts per million in float32. Normal samples are ``sqrt(2) *
erf_inv(u)``, so to give JAX's numbers plax evaluates the same approximation:
``w = -log1p(-x*x)``, then a polynomial in ``w`` (or ``sqrt(w)``) chosen by
the size of ``w``, times ``x``.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core.trace import get_aval

# Giles' single-precision coefficients, highest degree first: for w < 5 (in w - 2.5)
# and for w >= 5 (in sqrt(w) - 3).
_F32_SMALL_W = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_F32_LARGE_W = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

# Giles' double-precision coefficients, highest degree first, for w < 6.25 (in w - 3.125),
# w < 16 (in sqrt(w) - 3.25) and w >= 16 (in sqrt(w) - 5).
_F64_W_BELOW_6_25 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
_F64_W_BELOW_16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
_F64_W_ABOVE_16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


def _c(value, dtype):
    return lax.full((), value, dtype)


def _horner(coeffs, w, dtype):
    p = _c(coeffs[0], dtype)
    for coeff in coeffs[1:]:
        p = lax.add(_c(coeff, dtype), lax.mul(p, w))
    return p


def _log_term(x, dtype):
    """``w = -log1p(-x*x)``, as in the reference formula."""
    return lax.neg(lax.log1p(lax.neg(lax.mul(x, x))))


def _erf_inv_f32(x):
    dtype = np.dtype(np.float32)
    w = _log_term(x, dtype)
    small = lax.lt(w, _c(5.0, dtype))
    w_small = lax.sub(w, _c(2.5, dtype))
    w_large = lax.sub(lax.sqrt(w), _c(3.0, dtype))
    # One polynomial per branch, then a select: each element only uses its own branch.
    p = lax.select(small, _horner(_F32_SMALL_W, w_small, dtype),
                   _horner(_F32_LARGE_W, w_large, dtype))
    return p


def _erf_inv_f64(x):
    dtype = np.dtype(np.float64)
    w = _log_term(x, dtype)
    below_6_25 = lax.lt(w, _c(6.25, dtype))
    below_16 = lax.lt(w, _c(16.0, dtype))
    root = lax.sqrt(w)
    p1 = _horner(_F64_W_BELOW_6_25, lax.sub(w, _c(3.125, dtype)), dtype)
    p2 = _horner(_F64_W_BELOW_16, lax.sub(root, _c(3.25, dtype)), dtype)
    p3 = _horner(_F64_W_ABOVE_16, lax.sub(root, _c(5.0, dtype)), dtype)
    return lax.select(below_6_25, p1, lax.select(below_16, p2, p3))


def _erf_inv_value(x, open_interval: bool = False):
    """Giles' approximation; ``open_interval`` skips the ``|x| == 1`` fix-up for inputs known
    to lie strictly inside (-1, 1), as the uniforms behind normal samples do."""
    dtype = get_aval(x).dtype
    compute = dtype
    if dtype.itemsize < 4:
        compute = np.dtype(np.float32)
        x = lax.convert_element_type(x, compute)
    p = _erf_inv_f64(x) if compute == np.float64 else _erf_inv_f32(x)
    result = lax.mul(p, x)
    if not open_interval:
        at_one = lax.eq(lax.abs(x), _c(1.0, compute))
        result = lax.select(at_one, lax.mul(x, _c(np.inf, compute)), result)
    if compute != dtype:
        result = lax.convert_element_type(result, dtype)
    return result


def _make_erf_inv(open_interval: bool):
    from plax.transforms.custom_derivatives import custom_jvp

    @custom_jvp
    def erf_inv_(x):
        return _erf_inv_value(x, open_interval)

    @erf_inv_.defjvp
    def _erf_inv_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = erf_inv_(x)
        dtype = get_aval(out).dtype
        # d/dx erf_inv(x) = sqrt(pi)/2 * exp(erf_inv(x)^2), JAX's rule
        scale = lax.mul(_c(np.sqrt(np.pi) / 2, dtype), lax.exp(lax.mul(out, out)))
        return out, lax.mul(t, scale)

    erf_inv_.__doc__ = ("``erf_inv(x)`` by Giles' approximation (JAX's numbers); ``+-1`` map to "
                        "``+-inf`` and ``|x| > 1`` gives NaN." if not open_interval else
                        "``erf_inv`` for inputs strictly inside (-1, 1).")
    return erf_inv_


erf_inv = _make_erf_inv(open_interval=False)
erf_inv_open = _make_erf_inv(open_interval=True)


# ------------------------------------------------------------------ lgamma

# Lanczos approximation with g = 7 and 9 terms (the coefficients of Lanczos, "A Precision
# Approximation of the Gamma Function", SIAM J. Numer. Anal. B 1, 1964, as tabulated by
# Numerical Recipes / Boost for this (g, n)): JAX's compiler evaluates lgamma this way, and
# the Poisson rejection test compares against it, so plax does too.
_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS_COEFFS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
                   771.3234287776530788486528258894, -176.61502916214059906584551354,
                   12.507343278686904814458936853, -0.13857109526572011689554707,
                   9.984369578019570859563e-6, 1.50563273514931155834e-7)


def lgamma(x):
    """``log|Gamma(x)|`` by the Lanczos approximation (the formula JAX's compiler uses), with
    the reflection formula below 1/2. Float16/bfloat16 are computed in float32.

    Example:
      >>> lgamma(jnp.float32(5.0))   # log(24)
      Array(3.1780548, dtype=float32)
    """
    from plax.random._fma import fma
    dtype = get_aval(x).dtype
    compute = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    x = lax.convert_element_type(x, compute)
    c = lambda v: _c(v, compute)  # noqa: E731
    reflect = lax.lt(x, c(0.5))
    z = lax.select(reflect, lax.neg(x), lax.sub(x, c(1.0)))
    acc = c(_LANCZOS_BASE)
    for i, coeff in enumerate(_LANCZOS_COEFFS):
        acc = lax.add(acc, lax.div(c(coeff), lax.add(lax.add(z, c(float(i))), c(1.0))))
    t = lax.add(c(_LANCZOS_G + 0.5), z)
    log_t = lax.add(c(np.log(_LANCZOS_G + 0.5)), lax.log1p(lax.div(z, c(_LANCZOS_G + 0.5))))
    slope = lax.sub(lax.add(z, c(0.5)), lax.div(t, log_t))
    shape = get_aval(x).shape
    full = lambda v: lax.full(shape, v, compute)  # noqa: E731
    log_y = lax.add(fma(slope, log_t, full((np.log(2) + np.log(np.pi)) / 2)), lax.log(acc))
    abs_x = lax.abs(x)
    frac = lax.sub(abs_x, lax.floor(abs_x))
    reduced = lax.select(lax.gt(frac, c(0.5)), lax.sub(c(1.0), frac), frac)
    denom = lax.log(lax.sin(lax.mul(c(np.pi), reduced)))
    reflection = lax.select(lax.is_finite(denom), lax.sub(lax.sub(c(np.log(np.pi)), denom), log_y),
                            lax.neg(denom))
    result = lax.select(reflect, reflection, log_y)
    is_inf = lax.eq(abs_x, c(np.inf))
    result = lax.select(is_inf, lax.full_like(result, np.inf), result)
    return lax.convert_element_type(result, dtype)

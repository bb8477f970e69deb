"""More special functions as elementwise primitives: the incomplete gamma and beta functions,
Hurwitz's zeta and the exponentially scaled modified Bessel functions of orders 0 and 1.

Each takes float operands of one dtype, of equal shapes or rank 0 beside the others (as the
other elementwise primitives); ``plax.scipy.special`` does the promotion and broadcasting.
Derivatives follow JAX's: ``igamma_grad_a``, ``zeta`` and ``betainc`` in ``a``/``b`` have none.
"""
from __future__ import annotations

import plax.lax.binary as B
import plax.lax.unary as U
from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.trace import get_aval
from plax.core.shaped_array import ShapedArray
from plax.lax.base import FLOAT, asarray, check_dtype, same_dtypes, broadcasting_shape
from plax.lax.select import select
from plax.lax.shape import full_like
from plax.lax.special import lgamma
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import defjvp, defjvp2

__all__ = ["igamma", "igammac", "igamma_grad_a", "betainc", "zeta", "bessel_i0e", "bessel_i1e",
           "igamma_p", "igammac_p", "igamma_grad_a_p", "regularized_incomplete_beta_p", "zeta_p",
           "bessel_i0e_p", "bessel_i1e_p"]


def _float_op(name: str, arity: int) -> Primitive:
    """An elementwise primitive of ``arity`` float operands of one dtype (rank 0 broadcasts)."""
    prim = Primitive(name)

    def abstract_eval(*avals):
        if len(avals) != arity:
            raise TypeError(f"{name} takes {arity} operand{'s' * (arity > 1)}, got "
                            f"{len(avals)}.")
        for a in avals:
            check_dtype(name, a, (FLOAT,))
        dt = same_dtypes(name, avals)
        shape = broadcasting_shape(name, avals)
        return ShapedArray(shape, dt, all(a.weak_type for a in avals))

    prim.def_abstract_eval(abstract_eval)
    defbroadcasting(prim)
    return prim


igamma_p = _float_op("igamma", 2)
igammac_p = _float_op("igammac", 2)
igamma_grad_a_p = _float_op("igamma_grad_a", 2)
regularized_incomplete_beta_p = _float_op("regularized_incomplete_beta", 3)
zeta_p = _float_op("zeta", 2)
bessel_i0e_p = _float_op("bessel_i0e", 1)
bessel_i1e_p = _float_op("bessel_i1e", 1)
# elementwise: backends may fuse them (the Numba backend has scalar forms of each)
for _p in (igamma_p, igammac_p, igamma_grad_a_p, regularized_incomplete_beta_p, zeta_p,
           bessel_i0e_p, bessel_i1e_p):
    register_fusible(_p, ELEMENTWISE)


def igamma(a, x):
    """Regularized lower incomplete gamma function ``P(a, x)``, elementwise.

    ``P(a, x) = 1/Gamma(a) * integral_0^x t^(a-1) e^(-t) dt``. NaN where ``a < 0``,
    ``x < 0`` or ``a`` is infinite (XLA's conventions).

    Args:
      a: positive shape parameters (float).
      x: non-negative upper limits, of ``a``'s dtype.

    Returns:
      ``P(a, x)``, of the operands' dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.igamma(1.0, 2.0))  # 1 - exp(-2)
      0.8646647...
    """
    return igamma_p.bind(asarray(a), asarray(x))


def igammac(a, x):
    """Regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, elementwise.

    Args:
      a: positive shape parameters (float).
      x: non-negative lower limits, of ``a``'s dtype.

    Returns:
      ``Q(a, x)``, of the operands' dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.igammac(1.0, 2.0))  # exp(-2)
      0.1353352...
    """
    return igammac_p.bind(asarray(a), asarray(x))


def igamma_grad_a(a, x):
    """The derivative ``dP(a, x)/da`` of :func:`igamma` in its shape parameter, elementwise.

    Not itself differentiable (as in JAX).

    Args:
      a: positive shape parameters (float).
      x: non-negative upper limits, of ``a``'s dtype.

    Returns:
      ``dP/da``, of the operands' dtype.

    Example:
      >>> from plax import lax
      >>> round(float(lax.igamma_grad_a(2.0, 3.0)), 4)
      -0.1974
    """
    return igamma_grad_a_p.bind(asarray(a), asarray(x))


def betainc(a, b, x):
    """Regularized incomplete beta function ``I_x(a, b)``, elementwise.

    Differentiable in ``x`` only; differentiating in ``a`` or ``b`` raises ValueError (as JAX).

    Args:
      a: positive parameters (float).
      b: positive parameters, of ``a``'s dtype.
      x: points in ``[0, 1]``, of ``a``'s dtype.

    Returns:
      ``I_x(a, b)``, of the operands' dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.betainc(1.0, 1.0, 0.25))
      0.25
    """
    return regularized_incomplete_beta_p.bind(asarray(a), asarray(b), asarray(x))


def zeta(x, q):
    """Hurwitz zeta function ``zeta(x, q) = sum_{k>=0} (k + q)^(-x)``, elementwise.

    Not differentiable (as in JAX). NaN for ``x < 1`` and for infinite operands.

    Args:
      x: exponents (float).
      q: offsets, of ``x``'s dtype.

    Returns:
      ``zeta(x, q)``, of the operands' dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.zeta(2.0, 1.0))  # pi**2 / 6
      1.6449340...
    """
    return zeta_p.bind(asarray(x), asarray(q))


def bessel_i0e(x):
    """Exponentially scaled modified Bessel function of order 0: ``exp(-|x|) * I0(x)``.

    Args:
      x: a float array.

    Returns:
      ``i0e(x)``, of ``x``'s dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.bessel_i0e(0.0))
      1.0
    """
    return bessel_i0e_p.bind(asarray(x))


def bessel_i1e(x):
    """Exponentially scaled modified Bessel function of order 1: ``exp(-|x|) * I1(x)``.

    Args:
      x: a float array.

    Returns:
      ``i1e(x)``, of ``x``'s dtype.

    Example:
      >>> from plax import lax
      >>> float(lax.bessel_i1e(0.0))
      0.0
    """
    return bessel_i1e_p.bind(asarray(x))


# ------------------------------------------------------------------ derivatives (JAX's)

def _one(like):
    return B.full_like_scalar(1, like)


def _igamma_density(a, x):
    """``dP(a, x)/dx = x^(a-1) e^(-x) / Gamma(a)``."""
    return U.exp(B.sub(B.mul(B.sub(a, _one(a)), U.log(x)), B.add(x, lgamma(a))))


defjvp(igamma_p,
       lambda t, a, x: B.mul(t, igamma_grad_a(a, x)),
       lambda t, a, x: B.mul(t, _igamma_density(a, x)))
defjvp(igammac_p,
       lambda t, a, x: U.neg(B.mul(t, igamma_grad_a(a, x))),
       lambda t, a, x: U.neg(B.mul(t, _igamma_density(a, x))))


def _betainc_grad_ab(t, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


def _betainc_grad_x(t, a, b, x):
    # x^(a-1) (1-x)^(b-1) / B(a, b)
    lbeta = B.sub(B.add(lgamma(a), lgamma(b)), lgamma(B.add(a, b)))
    log_density = B.sub(B.add(B.mul(B.sub(b, _one(b)), U.log1p(U.neg(x))),
                              B.mul(B.sub(a, _one(a)), U.log(x))), lbeta)
    return B.mul(t, U.exp(log_density))


defjvp(regularized_incomplete_beta_p, _betainc_grad_ab, _betainc_grad_ab, _betainc_grad_x)

defjvp2(bessel_i0e_p, lambda t, y, x: B.mul(t, B.sub(bessel_i1e(x), B.mul(U.sign(x), y))))


def _bessel_i1e_grad(t, y, x):
    # i0e(x) - i1e(x) (sign(x) + 1/x), with the limit 1/2 where |x| is below the epsilon
    eps = float(dtypes.finfo(get_aval(x).dtype).eps)
    not_tiny = B.gt(U.abs(x), B.full_like_scalar(eps, x))
    safe_x = select(not_tiny, x, full_like(x, eps))
    dy = B.sub(bessel_i0e(safe_x), B.mul(y, B.add(U.sign(safe_x), B.div(_one(x), safe_x))))
    return B.mul(t, select(not_tiny, dy, full_like(x, 0.5)))


defjvp2(bessel_i1e_p, _bessel_i1e_grad)

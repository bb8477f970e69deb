"""The gamma and beta families: gammaln, gamma, gammasgn, digamma, polygamma, multigammaln,
factorial, betaln, beta, and the regularized incomplete gamma and beta functions."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["gammaln", "gamma", "gammasgn", "digamma", "polygamma", "multigammaln", "factorial",
           "betaln", "beta", "betainc", "gammainc", "gammaincc"]


def gammaln(x: ArrayLike) -> Array:
    """Natural log of the absolute value of the gamma function, elementwise.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``log|Gamma(x)|``; ``+inf`` at the poles ``0, -1, -2, ...``.

    Example:
      >>> from plax.scipy.special import gammaln
      >>> float(gammaln(5.0))  # log(4!)
      3.178053...
    """
    x, = inexact("gammaln", x)
    return lax.lgamma(x)


def gammasgn(x: ArrayLike) -> Array:
    """Sign of the gamma function, elementwise.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``+1`` or ``-1`` (``-1`` at ``-0.0``); NaN at the negative integers, ``-inf`` and NaN.

    Example:
      >>> from plax.scipy.special import gammasgn
      >>> float(gammasgn(-0.5))
      -1.0
    """
    x, = inexact("gammasgn", x)
    one = const(x, 1.0)
    floor_x = jnp.floor(x)
    odd = jnp.fmod(floor_x, 2) != 0
    sign = jnp.where((x < 0) & odd, -one, one)
    sign = jnp.where(x == 0, jnp.where(jnp.signbit(x), -one, one), sign)
    return jnp.where(((x < 0) & (x == floor_x)) | jnp.isnan(x), const(x, np.nan), sign)


def gamma(x: ArrayLike) -> Array:
    """The gamma function, elementwise, as ``gammasgn(x) * exp(gammaln(x))``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``Gamma(x)``: ``+-inf`` at ``+-0``, NaN at the negative integers.

    Example:
      >>> from plax.scipy.special import gamma
      >>> float(gamma(5.0))
      24.0...
    """
    x, = inexact("gamma", x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def digamma(x: ArrayLike) -> Array:
    """The digamma function ``psi(x) = d/dx log Gamma(x)``, elementwise.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``psi(x)``; NaN at the poles ``0, -1, -2, ...``.

    Example:
      >>> from plax.scipy.special import digamma
      >>> float(digamma(1.0))  # minus the Euler-Mascheroni constant
      -0.5772156...
    """
    x, = inexact("digamma", x)
    return lax.digamma(x)


def polygamma(n: ArrayLike, x: ArrayLike) -> Array:
    """The ``n``-th derivative of the digamma function, elementwise.

    Args:
      n: non-negative integer orders, of an integer dtype (as JAX requires).
      x: arraylike; integers promote to floats.

    Returns:
      ``psi^(n)(x)``, of the promoted inexact dtype.

    Raises:
      ValueError: if ``n`` is not of an integer dtype.

    Example:
      >>> from plax.scipy.special import polygamma
      >>> float(polygamma(1, 1.0))  # pi**2 / 6
      1.6449340...
    """
    if not jnp.issubdtype(jnp.result_type(n), jnp.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{jnp.result_type(n)}.")
    n, x = inexact("polygamma", n, x)
    return lax.polygamma(n, x)


def multigammaln(a: ArrayLike, d: int) -> Array:
    """Log of the multivariate gamma function of dimension ``d``, elementwise in ``a``.

    ``log Gamma_d(a) = d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2)``.

    Args:
      a: arraylike; integers promote to floats.
      d: the dimension, a concrete Python integer.

    Returns:
      ``log Gamma_d(a)``.

    Example:
      >>> from plax.scipy.special import multigammaln
      >>> multigammaln(3.0, 2)
      Array(1.550195, dtype=float32)
    """
    d = int(d)
    a, = inexact("multigammaln", a)
    out = const(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        out = out + lax.lgamma(a - const(a, j / 2))
    return out


def factorial(n: ArrayLike, exact: bool = False) -> Array:
    """The factorial ``n! = Gamma(n + 1)``, elementwise (0 for negative ``n``).

    Args:
      n: arraylike; integers promote to floats.
      exact: only ``False`` is supported (as in JAX).

    Returns:
      ``Gamma(n + 1)`` where ``n >= 0``, else 0.

    Example:
      >>> from plax.scipy.special import factorial
      >>> float(factorial(4))
      24.0...
    """
    if exact:
        raise ValueError(f"factorial with exact=True is not supported; got exact={exact!r}")
    n, = inexact("factorial", n)
    return jnp.where(n < 0, const(n, 0.0), lax.exp(lax.lgamma(n + const(n, 1.0))))


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """Natural log of the absolute value of the beta function, elementwise.

    ``log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``.

    Args:
      a, b: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``log|B(a, b)|``.

    Example:
      >>> from plax.scipy.special import betaln
      >>> betaln(2.0, 3.0)  # log(1/12)
      Array(-2.4849067, dtype=float32, weak_type=True)
    """
    a, b = inexact("betaln", a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)``, elementwise.

    Args:
      a, b: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``B(a, b)``, with its sign for negative arguments.

    Example:
      >>> from plax.scipy.special import beta
      >>> round(float(beta(2.0, 3.0)), 6)
      0.083333
    """
    a, b = inexact("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The regularized incomplete beta function ``I_x(a, b)``, elementwise.

    Differentiable in ``x`` (not in ``a`` or ``b``, as in JAX).

    Args:
      a, b: positive parameters; integers promote to floats.
      x: points in ``[0, 1]``; all three broadcast together.

    Returns:
      ``I_x(a, b)``; NaN outside the domain.

    Example:
      >>> from plax.scipy.special import betainc
      >>> float(betainc(1.0, 1.0, 0.25))
      0.25
    """
    a, b, x = inexact("betainc", a, b, x)
    return lax.betainc(a, b, x)


def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)``, elementwise.

    Args:
      a: positive shape parameters; integers promote to floats.
      x: non-negative limits; broadcast with ``a``.

    Returns:
      ``P(a, x)``; differentiable in both arguments.

    Example:
      >>> from plax.scipy.special import gammainc
      >>> round(float(gammainc(1.0, 2.0)), 6)  # 1 - exp(-2)
      0.864665
    """
    a, x = inexact("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, elementwise.

    Args:
      a: positive shape parameters; integers promote to floats.
      x: non-negative limits; broadcast with ``a``.

    Returns:
      ``Q(a, x)``; differentiable in both arguments.

    Example:
      >>> from plax.scipy.special import gammaincc
      >>> round(float(gammaincc(1.0, 2.0)), 6)  # exp(-2)
      0.135335
    """
    a, x = inexact("gammaincc", a, x)
    return lax.igammac(a, x)

"""Reference kernels of the primitives of ``plax.lax.special_functions``: the incomplete gamma
and beta functions, Hurwitz's zeta and the scaled Bessel functions, by ``scipy.special`` on the
host, with XLA's values where SciPy's conventions differ (NaN for infinite shape parameters)."""
from __future__ import annotations

import numpy as np

from plax.lax import special_functions as S
from plax_numpy.registry import impl, lowp, quiet


def _same_dtype(fn):
    """Casts ``fn``'s result to its first operand's dtype (SciPy may widen)."""
    def wrapped(*args):
        return np.asarray(fn(*args)).astype(args[0].dtype, copy=False)
    wrapped.__name__ = fn.__name__
    return wrapped


def _kernel(prim):
    def register(fn):
        return impl(prim, fresh=True)(_same_dtype(lowp(quiet(fn))))  # (scipy ufuncs, np.where)
    return register


@_kernel(S.igamma_p)
def igamma(a, x):
    import scipy.special
    return np.where(np.isinf(a), np.nan, scipy.special.gammainc(a, x))


@_kernel(S.igammac_p)
def igammac(a, x):
    import scipy.special
    return np.where(np.isinf(a), np.nan, scipy.special.gammaincc(a, x))


@_kernel(S.igamma_grad_a_p)
def igamma_grad_a(a, x):
    """dP/da = -(dx/da of a gamma sample) * dP/dx (the sample derivative's kernel, to
    convergence, times the gamma density)."""
    import scipy.special
    from plax_numpy.impls_random import random_gamma_grad
    a, x = np.broadcast_arrays(a, x)
    inside = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    sa, sx = np.where(inside, a, 1), np.where(inside, x, 1)
    density = np.exp((sa - 1) * np.log(sx) - sx - scipy.special.gammaln(sa))
    out = -np.asarray(random_gamma_grad(sa, sx), sa.dtype) * density
    out = np.where(inside, out, np.nan)
    return np.where((x == 0) & (a > 0) & np.isfinite(a), 0, out)


@_kernel(S.regularized_incomplete_beta_p)
def betainc(a, b, x):
    import scipy.special
    return scipy.special.betainc(a, b, x)


@_kernel(S.zeta_p)
def zeta(x, q):
    import scipy.special
    return np.where(np.isinf(x) | np.isinf(q), np.nan, scipy.special.zeta(x, q))


@_kernel(S.bessel_i0e_p)
def bessel_i0e(x):
    import scipy.special
    return scipy.special.i0e(x)


@_kernel(S.bessel_i1e_p)
def bessel_i1e(x):
    import scipy.special
    return scipy.special.i1e(x)

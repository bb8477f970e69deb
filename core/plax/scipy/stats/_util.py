"""Shared helpers of plax.scipy.stats: argument promotion and log-space arithmetic."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.special._util import Array, ArrayLike, const, inexact

__all__ = ["Array", "ArrayLike", "const", "inexact", "log_diff_exp", "NEG_INF", "NAN"]

NEG_INF = -np.inf
NAN = np.nan


def log_diff_exp(u: Array, v: Array) -> Array:
    """``log(exp(u) - exp(v))`` for ``u >= v``, without cancellation (``-inf`` if equal)."""
    safe_u = jnp.where(jnp.isfinite(u), u, jnp.zeros_like(u))
    d = jnp.where(jnp.isfinite(u), v - safe_u, jnp.full_like(u, -np.inf))
    # log1p(-exp(d)) for d <= 0, accurate at both ends
    cut = const(d, -0.6931471805599453)
    log1mexp = jnp.where(d < cut, lax.log1p(-jnp.exp(jnp.minimum(d, cut))),
                         jnp.log(-jnp.expm1(jnp.maximum(d, cut))))
    return jnp.where(jnp.isfinite(u), safe_u + log1mexp, u)


def promote_dtypes_inexact(*args: ArrayLike) -> list:
    """``args`` converted to their common inexact dtype (JAX's rule), shapes untouched."""
    from plax import dtypes
    from plax.numpy.util import check_arraylike, to_dtype, to_inexact_dtype
    check_arraylike("promote_dtypes_inexact", *args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return [to_dtype(a, to_inexact_dtype(dt), weak) for a in args]

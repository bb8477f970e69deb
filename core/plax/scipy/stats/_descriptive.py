"""Descriptive statistics: mode, rankdata and sem (``scipy.stats``'s functions of a sample)."""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

import plax
from plax import numpy as jnp
from plax.numpy.util import canonicalize_axis, check_arraylike

from ._util import Array, ArrayLike, promote_dtypes_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def _check_nan_policy(name: str, nan_policy: str, supported: tuple[str, ...]) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         f"{{'propagate', 'omit', 'raise'}}")
    if nan_policy not in supported:
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not supported under "
                                  f"plax (it would need the data's values at trace time); "
                                  f"supported: {list(supported)}")


class ModeResult(NamedTuple):
    """The most common value along an axis and how often it occurs."""
    mode: Array
    count: Array


def _mode_1d(x: Array) -> tuple[Array, Array]:
    """The smallest most frequent value of a 1-D array, and its count."""
    s = jnp.sort(x)
    counts = (jnp.searchsorted(s, s, side="right") - jnp.searchsorted(s, s, side="left"))
    best = jnp.argmax(counts)
    return s[best], counts[best].astype(jnp.result_type(int))


def mode(a: ArrayLike, axis: int | None = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most common value along ``axis`` (the smallest, if several tie), with its count.

    Args:
      a: arraylike.
      axis: the axis to reduce; ``None`` flattens.
      nan_policy: only ``"propagate"`` (as in JAX).
      keepdims: keep the reduced axis with length 1.

    Returns:
      A :class:`ModeResult` ``(mode, count)``.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import mode
      >>> res = mode(jnp.array([2, 4, 1, 1, 3, 4, 4]))
      >>> int(res.mode), int(res.count)
      (4, 3)
    """
    check_arraylike("mode", a)
    _check_nan_policy("mode", nan_policy, ("propagate",))
    x = jnp.atleast_1d(jnp.asarray(a))
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = x.reshape(-1, 1)
    else:
        axis = canonicalize_axis(axis, x.ndim)
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdims \
            else tuple(s for i, s in enumerate(x.shape) if i != axis)
        x = jnp.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
    if x.shape[0] == 0:
        raise ValueError("mode: the reduced axis has length 0")
    vals, counts = plax.vmap(_mode_1d, in_axes=1)(x)
    return ModeResult(vals.reshape(out_shape), counts.reshape(out_shape))


def _rank_1d(x: Array, method: str, out_dtype: Any) -> Array:
    s = jnp.sort(x)
    if method == "ordinal":
        order = jnp.argsort(x, stable=True)
        ranks = jnp.zeros(x.shape, dtype=order.dtype).at[order].set(
            jnp.arange(1, x.shape[0] + 1, dtype=order.dtype))
        out = ranks.astype(out_dtype)
    elif method == "dense":
        new = jnp.concatenate([jnp.ones((1,), bool), s[1:] != s[:-1]])
        dense_sorted = jnp.cumsum(new.astype(np.int32))
        out = dense_sorted[jnp.searchsorted(s, x, side="left")].astype(out_dtype)
    else:
        below = jnp.searchsorted(s, x, side="left").astype(out_dtype)   # values < x
        upto = jnp.searchsorted(s, x, side="right").astype(out_dtype)   # values <= x
        out = {"min": below + 1, "max": upto, "average": (below + 1 + upto) / 2}[method]
    return jnp.where(jnp.any(jnp.isnan(x)), jnp.full_like(out, np.nan), out)


def rankdata(a: ArrayLike, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Array:
    """Ranks (1-based) of the data, ties resolved by ``method``.

    Args:
      a: arraylike.
      method: ``"average"`` (mean rank of a tie group), ``"min"``, ``"max"``, ``"dense"``
        (consecutive ranks for distinct values) or ``"ordinal"`` (ties by position).
      axis: rank along this axis; ``None`` ranks the flattened array.
      nan_policy: only ``"propagate"``: a slice holding a NaN ranks as all NaN.

    Returns:
      The ranks as the default float dtype (as JAX), of ``a``'s shape (flattened if
      ``axis`` is None).

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import rankdata
      >>> rankdata(jnp.array([10, 30, 20, 30])).tolist()
      [1.0, 3.5, 2.0, 3.5]
    """
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy, ("propagate",))
    if method not in _RANK_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(_RANK_METHODS)}")
    x = jnp.asarray(a)
    out_dtype = jnp.result_type(float)
    fn = lambda v: _rank_1d(v, method, out_dtype)
    if axis is None:
        return fn(x.ravel())
    axis = canonicalize_axis(axis, x.ndim)
    moved = jnp.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    ranks = plax.vmap(fn)(flat).reshape(moved.shape)
    return jnp.moveaxis(ranks, -1, axis)


def sem(a: ArrayLike, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Array:
    """Standard error of the mean, ``std(a, ddof) / sqrt(n)``.

    Args:
      a: arraylike; integers promote to floats.
      axis: the axis to reduce; ``None`` flattens.
      ddof: delta degrees of freedom of the standard deviation.
      nan_policy: ``"propagate"`` or ``"omit"`` (NaNs are left out of both the deviation
        and the count).
      keepdims: keep the reduced axis with length 1.

    Returns:
      The standard error.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import sem
      >>> round(float(sem(jnp.array([1.0, 2.0, 3.0, 4.0]))), 6)
      0.645497
    """
    check_arraylike("sem", a)
    _check_nan_policy("sem", nan_policy, ("propagate", "omit"))
    b, = promote_dtypes_inexact(jnp.asarray(a))
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(b), axis=axis, keepdims=keepdims)
        return (jnp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(count.astype(b.dtype)))
    n = b.size if axis is None else b.shape[canonicalize_axis(axis, b.ndim)]
    return jnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(n)

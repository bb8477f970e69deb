"""Argument checking shared by the samplers: shapes, dtypes, parameters."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from plax import dtypes
from plax.array import Array
from plax.core.trace import Tracer, get_aval
from plax.lax.base import canonicalize_shape


def staged(*static_argnames: str):
    """Compiles a sampler kernel with ``plax.jit`` (shape, dtype and other configuration
    arguments static), as JAX does: an eager call then runs one cached executable instead of
    dispatching dozens of primitives, and under other transforms the kernel is inlined.

    Example:
      >>> @staged("shape", "dtype")
      ... def _kernel(data, shape, dtype): ...
    """
    def wrap(fn):
        from plax.transforms.jit import jit
        return jit(fn, static_argnames=static_argnames)
    return wrap


def canonical_shape(shape: Any, name: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints.

    Raises:
      TypeError: for entries that are not concrete integers.
      ValueError: for negative dimensions.
    """
    try:
        return canonicalize_shape(shape)
    except ValueError as err:
        raise ValueError(f"{name}: invalid shape {shape!r}: {err}") from None
    except TypeError as err:
        raise TypeError(f"{name}: invalid shape {shape!r}: {err}") from None


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array, tracer or host value."""
    if isinstance(x, (Array, Tracer)):
        return tuple(get_aval(x).shape)
    return np.shape(x)


def broadcast_shapes(name: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    from plax.numpy.util import broadcast_shapes as _bcast
    try:
        return _bcast(*shapes)
    except ValueError:
        raise ValueError(f"{name}: parameter shapes {[tuple(s) for s in shapes]} are not "
                         "broadcast-compatible.") from None


def check_shape(name: str, shape: tuple[int, ...], *param_shapes: Sequence[int]) -> None:
    """Checks that the parameters broadcast to exactly ``shape`` (JAX's rule).

    Raises:
      ValueError: when they do not, naming the shapes.
    """
    if not param_shapes:
        return
    try:
        from plax.numpy.util import broadcast_shapes as _bcast
        joint = _bcast(shape, *param_shapes)
    except ValueError:
        joint = None
    if joint != tuple(shape):
        raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                         f"argument, and the result of broadcasting the shapes must equal the "
                         f"shape argument, but got parameter shapes "
                         f"{[tuple(s) for s in param_shapes]} for shape argument {tuple(shape)}.")


def resolve_shape(name: str, shape: Any, *params: Any) -> tuple[int, ...]:
    """``shape`` if given (checked against the parameters' shapes), else their broadcast shape."""
    param_shapes = [shape_of(p) for p in params]
    if shape is None:
        return broadcast_shapes(name, *param_shapes) if param_shapes else ()
    shape = canonical_shape(shape, name)
    check_shape(name, shape, *param_shapes)
    return shape


def float_dtype(dtype: Any, name: str) -> np.dtype:
    """The (canonical) float dtype a sampler returns: ``dtype``, or float32/float64 by default.

    Raises:
      ValueError: for a non-float dtype.
    """
    dt = dtypes.check_user_dtype(float if dtype is None else dtype, None)  # unnamed, as JAX
    if not dtypes.is_float(dt):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dt.name}")
    return dt


def int_dtype(dtype: Any, name: str) -> np.dtype:
    """The (canonical) integer dtype a sampler returns (int32/int64 by default).

    Raises:
      ValueError: for a non-integer dtype.
    """
    dt = dtypes.check_user_dtype(int if dtype is None else dtype, None)  # unnamed, as JAX
    if not dtypes.is_integer(dt):
        raise ValueError(f"dtype argument to `{name}` must be an integer dtype, got {dt.name}")
    return dt


def concrete_value(x: Any) -> np.ndarray | None:
    """``x`` as a NumPy array when it is concrete (a host value or an Array), else None."""
    if isinstance(x, Tracer):
        return None
    if isinstance(x, Array):
        return np.asarray(x)
    try:
        return np.asarray(x)
    except Exception:
        return None


def takes_out_sharding(sampler: Callable) -> Callable:
    """``sampler`` with JAX 0.10's keyword ``out_sharding=``: the samples placed with that
    explicit sharding (:func:`plax.sharding_types.with_out_sharding`, as ``random.normal``
    does); without it the sampler runs as it is.

    Example:
      >>> @takes_out_sharding
      ... def sampler(key, shape=()): ...
    """
    @functools.wraps(sampler)
    def with_sharding(*args, out_sharding=None, **kwargs):
        if out_sharding is None:
            return sampler(*args, **kwargs)
        from plax.sharding_types import with_out_sharding
        return with_out_sharding(lambda: sampler(*args, **kwargs), out_sharding)

    sig = inspect.signature(sampler)
    keyword = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)
    with_sharding.__signature__ = sig.replace(parameters=[*sig.parameters.values(), keyword])
    return with_sharding

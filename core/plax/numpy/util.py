"""Shared helpers of plax.numpy: argument checks, dtype promotion and shape broadcasting."""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from plax import dtypes
from plax import lax
from plax.lax import shape as _lax_shape
from plax.array import ARRAYLIKE_TYPES, Array, from_host
from plax.config import config as _config
from plax.core.trace import Tracer, get_aval, state as _trace_state
from plax.sharding import mesh_maybe_set as _mesh_maybe_set

def is_arraylike(x: Any) -> bool:
    return isinstance(x, ARRAYLIKE_TYPES)


def reject_out(out: Any, fun_name: str, *, where: Any = None) -> None:
    """Raises JAX's NotImplementedError for an ``out=`` array: plax arrays are immutable, so
    results are always new arrays (``out=None`` is accepted, as NumPy's default). The one
    check of ``out=`` for every function of ``plax.numpy`` and the ufunc objects.

    Args:
      out: the ``out`` argument given.
      fun_name: what the message names, as JAX's does: a function of ``jnp`` by its name
        (``"round"``: "The 'out' argument to jnp.round ..."), or a ufunc object's call or
        method as JAX's ufunc messages name it (``"<jnp.ufunc 'add'>"``,
        ``"add.accumulate()"``: "out argument of <jnp.ufunc 'add'> ...").
      where: a ufunc call's ``where`` mask, which JAX also accepts only as None.

    Raises:
      NotImplementedError: ``out`` (or ``where``) is not None.

    Example:
      >>> reject_out(None, "trace")   # nothing happens
    """
    if out is None and where is None:
        return
    keyword, reason = ("out", "plax arrays are immutable") if out is not None else \
        ("where", "only None")
    if fun_name.isidentifier():
        raise NotImplementedError(f"The '{keyword}' argument to jnp.{fun_name} is not "
                                  f"supported ({reason}).")
    raise NotImplementedError(f"{keyword} argument of {fun_name} is not supported ({reason})")


def check_arraylike(fun_name: str, *args: Any) -> None:
    """Raises TypeError naming ``fun_name`` if an argument is not an array or scalar.

    (Like JAX, plax.numpy does not accept lists and tuples where arrays are expected;
    wrap them in jnp.array first.)
    """
    for pos, arg in enumerate(args):
        if not is_arraylike(arg):
            from plax.errors import jax_array_operand
            refused = jax_array_operand(arg)
            if refused is not None:
                raise refused
            # JAX's first line; the advice on a line of its own after it
            hint = ("\nUse jnp.array(...) to convert a list or tuple."
                    if isinstance(arg, (list, tuple)) else "")
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got {type(arg)} "
                            f"at position {pos}.{hint}")


def converted_first(*operands: Any) -> tuple:
    """``operands``, each host value converted to an Array as the ``jax.numpy`` functions
    that call ``asarray`` on their operands first (``transpose``, ``squeeze``, ``astype``,
    ``tensordot``, ``einsum``) convert it: under a set mesh that places it ``P()``, so the
    function's eager result is typed ``P(None, ...)``
    (:func:`plax.sharding_eager.host_operands_placed`). With no mesh set, ``operands`` as
    they are, after one flag read.

    Returns:
      A tuple of the operands, in order.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     converted_first(np.ones(2), 1.0)[0].sharding.spec
      P()
    """
    if not _mesh_maybe_set[0]:
        return operands
    from plax.sharding_eager import host_operands_placed
    return tuple(host_operands_placed(operands))


def asarray_weak(x: Any):
    """An Array/tracer from an array-like, Python scalars weakly typed."""
    if isinstance(x, (Array, Tracer)):
        return x
    return from_host(x)


def to_dtype(x: Any, dtype: np.dtype, weak: bool = False):
    """``x`` as an array of ``dtype`` (and weak type)."""
    if isinstance(x, (Array, Tracer)):
        a = x.aval
        if a.dtype == dtype and a.weak_type == weak:
            return x
        return lax.convert_element_type(x, dtype, weak)
    if isinstance(x, dtypes.HOST_VALUE_TYPES):
        if isinstance(x, int) and not isinstance(x, bool):
            # As in JAX: a Python int must fit the default int type; it then wraps to ``dtype``
            # (uint8 array + 300 is uint8 array + 44).
            default = dtypes.default_int_dtype()
            info = np.iinfo(default)
            if not info.min <= x <= info.max:
                raise OverflowError(f"Python int {x} too large to convert to {default.name}")
            host = np.asarray(x, default)
        else:
            host = np.asarray(x)
        if host.dtype.kind == "c" and dtype.kind != "c":
            raise TypeError(f"Cannot convert complex value {x!r} to {dtype.name}")
        if host.ndim and host.dtype != dtype and _trace_state.depth:
            # As JAX: a NumPy array (not a scalar) is a constant of its own dtype and the
            # conversion an equation of the jaxpr (``{ lambda a:i32[3]; ... convert a }``)
            return lax.convert_element_type(from_host(host), dtype, weak)
        return from_host(host.astype(dtype) if host.dtype != dtype else host, weak_type=weak)
    raise TypeError(f"Cannot convert {x!r} of type {type(x).__name__} to an array")


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``.

    Raises:
      ValueError: naming the incompatible shapes.
      TypeError: for a negative size.
    """
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if d < 0:
                raise TypeError(f"broadcast_shapes: shapes must have non-negative sizes, got "
                                f"{tuple(s)}")
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise ValueError(f"Incompatible shapes for broadcasting: shapes="
                                 f"{[tuple(x) for x in shapes]}")
    return tuple(out)


def broadcast_to(array, shape: Sequence[int], out_sharding=None):
    """NumPy-style broadcast of ``array`` to ``shape`` (``out_sharding``: the result's
    explicit sharding; a positional-or-keyword default, so calls without it cost nothing).

    Example:
      >>> jnp.broadcast_to(jnp.ones(3), (2, 3)).shape
      (2, 3)
    """
    if out_sharding is not None:
        from plax.sharding_types import with_out_sharding
        return with_out_sharding(lambda: broadcast_to(array, shape), out_sharding)
    array = asarray_weak(array)
    shape = tuple(shape)
    xs = get_aval(array).shape
    if xs == shape:
        return array
    if len(xs) > len(shape):
        raise ValueError(f"Incompatible shapes for broadcasting: {xs} and requested shape {shape}")
    lead = len(shape) - len(xs)
    for i, d in enumerate(xs):
        if d != 1 and d != shape[lead + i]:
            raise ValueError(f"Incompatible shapes for broadcasting: {xs} and requested shape "
                             f"{shape}")
    return lax.broadcast_in_dim(array, shape, tuple(range(lead, len(shape))))


def promote_dtypes(*args: Any) -> list:
    """Converts ``args`` to their common dtype under JAX's promotion rules (shapes untouched)."""
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return [to_dtype(a, dt, weak) for a in args]


def promote_shapes(fun_name: str, *args: Any) -> list:
    """NumPy's rank promotion of ``args``, leaving size-1 broadcasting to the primitives.

    As JAX's ``promote_shapes``: operands of one rank, or of rank 0 beside one other rank, are
    returned unchanged (the n-ary elementwise primitives broadcast rank 0 and size-1 axes
    themselves, so ``add`` of ``f32[3,1]`` and ``f32[1,4]`` is one equation). Otherwise every
    operand gains leading size-1 axes up to the largest rank (``broadcast_in_dim`` of ``f32[4]``
    to ``f32[1,4]``), after the check ``jax_numpy_rank_promotion`` asks for. Functions that feed
    a primitive without size-1 broadcasting (``select_n``, ``clamp``) broadcast fully with
    :func:`broadcast_all`.

    Args:
      fun_name: the jnp function's name, for messages.
      *args: arrays or tracers.

    Returns:
      A list of the operands, of one rank (or rank 0).

    Raises:
      ValueError: shapes of different ranks that do not broadcast (JAX's message), or any rank
        promotion under ``jax_numpy_rank_promotion='raise'``.

    Example:
      >>> [a.shape for a in promote_shapes("add", jnp.ones((3, 4)), jnp.ones(4))]
      [(3, 4), (1, 4)]
    """
    if len(args) < 2:
        return list(args)
    shapes = [get_aval(a).shape for a in args]
    ranks = {len(s) for s in shapes if s}
    if len(ranks) < 2:
        return list(args)
    if _config_values["numpy_rank_promotion"] != "allow":
        _rank_promotion(fun_name, shapes)
    rank = len(broadcast_shapes(*shapes))  # JAX's ValueError for shapes that cannot broadcast
    return [_lax_shape.broadcast_to_rank(a, rank) for a in args]


def broadcast_all(*args: Any) -> list:
    """``args`` (arrays or tracers) each broadcast to their common shape, rank-0 ones included:
    the operands of a primitive that requires equal shapes (``select_n``'s cases), as JAX's
    ``_broadcast_arrays`` makes them.

    Raises:
      ValueError: naming the shapes if they do not broadcast.

    Example:
      >>> [a.shape for a in broadcast_all(jnp.ones((3, 1)), jnp.ones(4), jnp.float32(2))]
      [(3, 4), (3, 4), (3, 4)]
    """
    shape = broadcast_shapes(*[get_aval(a).shape for a in args])
    return [broadcast_to(a, shape) for a in args]


def broadcast_nonscalars(*args: Any) -> list:
    """``args`` (arrays or tracers) of rank above 0 broadcast to their common shape, rank-0 ones
    left as they are: the operands of a composite of primitives that take rank 0 beside any
    shape but not size-1 axes (``select_n``, ``clamp``), which plax's own compositions of
    ``floor_divide``, integer ``power``, ... build on.

    Raises:
      ValueError: naming the shapes if they do not broadcast.

    Example:
      >>> [a.shape for a in broadcast_nonscalars(jnp.ones((3, 1)), jnp.ones(4), jnp.float32(2))]
      [(3, 4), (3, 4), ()]
    """
    shape = broadcast_shapes(*[get_aval(a).shape for a in args])
    return [a if get_aval(a).shape in ((), shape) else broadcast_to(a, shape) for a in args]


_config_values = _config._values


def _rank_promotion(fun_name: str, shapes) -> None:
    """JAX's warning or error for operands of different ranks, as
    ``jax_numpy_rank_promotion`` ("warn" or "raise") asks."""
    listed = " ".join(map(str, shapes))
    more = "see https://docs.jax.dev/en/latest/rank_promotion_warning.html."
    if _config_values["numpy_rank_promotion"] == "raise":
        raise ValueError(f"Operands could not be broadcast together for {fun_name} on shapes "
                         f"{listed} and with the config option "
                         f"jax_numpy_rank_promotion='raise'. For more information, {more}")
    warnings.warn(f"Following NumPy automatic rank promotion for {fun_name} on shapes {listed}. "
                  "Set the jax_numpy_rank_promotion config option to 'allow' to disable this "
                  f"warning; for more information, {more}", stacklevel=4)


def promote_args(fun_name: str, *args: Any) -> list:
    """dtype promotion then broadcasting: the argument handling of every jnp binary ufunc."""
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes(*args))


# The float type integer inputs of sin, /, mean, ... are computed in (JAX's rule): bool and
# integers of up to 32 bits give float32 even with x64 enabled, 64-bit integers float64.
_TO_INEXACT = {np.dtype(t): np.dtype(f) for t, f in [
    (np.bool_, np.float32), (np.int8, np.float32), (np.int16, np.float32), (np.int32, np.float32),
    (np.uint8, np.float32), (np.uint16, np.float32), (np.uint32, np.float32),
    (np.int64, np.float64), (np.uint64, np.float64)]}


def to_inexact_dtype(dtype: np.dtype) -> np.dtype:
    """The inexact dtype functions like ``sin`` or ``/`` compute ``dtype`` values in.

    Example:
      >>> from plax.numpy.util import to_inexact_dtype
      >>> to_inexact_dtype(np.dtype("int16"))
      dtype('float32')
    """
    return dtypes.canonicalize_dtype(_TO_INEXACT.get(np.dtype(dtype), dtype))


def promote_args_inexact(fun_name: str, *args: Any) -> list:
    """Like :func:`promote_args`, then to an inexact type (:func:`to_inexact_dtype`)."""
    check_arraylike(fun_name, *args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    dt = to_inexact_dtype(dt)
    return promote_shapes(fun_name, *[to_dtype(a, dt, weak) for a in args])


def canonicalize_axis(axis, ndim: int) -> int:
    """``axis`` in ``[0, ndim)``, accepting negative axes.

    Raises:
      TypeError: if ``axis`` is not an integer.
      ValueError: naming the axis and the rank if it is out of range (JAX's exception and
        message; NumPy's own ``AxisError`` never escapes).
    """
    if isinstance(axis, (bool, np.bool_)) or not (isinstance(axis, (int, np.integer))
                                                  or hasattr(axis, "__index__")):
        raise TypeError(f"axis must be an integer, got {axis!r} of type {type(axis).__name__}")
    axis = int(axis.__index__())
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis


def canonicalize_axis_tuple(axis, ndim: int) -> tuple[int, ...]:
    """Normalises ``axis`` (None, int or sequence) to a sorted tuple of non-negative axes.

    Raises:
      ValueError: for an axis out of range or a repeated axis.
    """
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, (tuple, list)):
        axis = (axis,)
    out = [canonicalize_axis(a, ndim) for a in axis]
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis: {tuple(axis)}")
    return tuple(sorted(out))

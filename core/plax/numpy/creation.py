"""Array creation: array, asarray, zeros/ones/full/empty (and ``*_like``), arange, linspace,
logspace, geomspace, eye, identity, tri, meshgrid, indices, from_dlpack."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from plax import dtypes, lax
from plax.array import Array, from_host
from plax.core.trace import Tracer, get_aval
from plax.core.varying import vary_like
from plax.float0 import is_float0_value
from plax.transforms.jit import jit_when_traced
from plax.lax import base as _lax_base
from plax.numpy.jax_array_protocol import array_from_jax_array, has_jax_array, unwrap_leaves
from plax.numpy.util import check_arraylike, to_dtype
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.sharding_types import with_out_sharding


def canonicalize_shape(shape: Any) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints; negative sizes raise TypeError, as in JAX."""
    try:
        return _lax_base.canonicalize_shape(shape)
    except ValueError as err:
        raise TypeError(f"{err}; array shapes must be non-negative, got {shape!r}") from None


def _has_traced(obj) -> bool:
    """Whether nested lists hold an Array, a tracer or an object with ``__jax_array__``
    (which may return either)."""
    if isinstance(obj, (Array, Tracer)):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_traced(o) for o in obj)
    return has_jax_array(obj)


def _sequence_leaves(obj) -> list:
    """The non-sequence items of nested lists/tuples, each as an array (for their joint dtype)."""
    if isinstance(obj, (list, tuple)):
        return [leaf for o in obj for leaf in _sequence_leaves(o)]
    return [array(obj)]


def _join_traced_rows(obj, dt):
    """Builds nested lists holding tracers as JAX stages them: each leaf cast to ``dt``, each
    item given a leading axis with ``broadcast_in_dim``, the items joined by ``concatenate``
    (one row at a time, depth first), so ``make_jaxpr`` prints JAX's equations in JAX's order."""
    if not isinstance(obj, (list, tuple)):
        return to_dtype(array(obj), dt)
    if not obj:
        return from_host(np.zeros((0,), dt))
    lifted = []
    for o in obj:  # each item is lifted as soon as it is built, the order JAX stages them in
        row = _join_traced_rows(o, dt)
        shape = get_aval(row).shape
        lifted.append(lax.broadcast_in_dim(row, (1,) + shape, tuple(range(1, len(shape) + 1))))
    shapes = [get_aval(r).shape[1:] for r in lifted]
    if len(set(shapes)) > 1:
        # a TypeError, as JAX raises (it joins the items with concatenate)
        raise TypeError(f"array(): cannot build a rectangular array from items of shapes "
                        f"{shapes}: the items of a list must all have the same shape")
    return lax.concatenate(lifted, 0)


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = "K",
          ndmin: int = 0, *, device=None, out_sharding=None):
    """Creates an array from an array, a NumPy array, a scalar or nested lists/tuples of them.

    Args:
      object: the data. Python scalars give weakly typed arrays; lists are typed by JAX's
        promotion rules; NumPy float64 becomes float32 unless x64 is enabled.
      dtype: the dtype to cast to.
      ndmin: prepend axes of size 1 up to this many dimensions.
      device: a Device or Sharding to put the result on, as ``device_put`` (default: the
        default device).
      out_sharding: an explicit sharding for the result.

    Returns:
      A new Array.

    Example:
      >>> jnp.array([[1.0, 2.0], [3.0, 4.0]])
      Array([[1., 2.],
             [3., 4.]], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: array(object, dtype, copy, order, ndmin, device=device),
                                 out_sharding)
    if device is not None:
        from plax.device import device_put
        return device_put(array(object, dtype, copy, order, ndmin), device)
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"array(order={order!r}) is not supported; plax arrays are "
                                  "row-major")
    target = None if dtype is None else dtypes.check_user_dtype(dtype, "array")
    if isinstance(object, range):
        object = list(object)
    if isinstance(object, (Array, Tracer)):
        out = object if target is None else lax.convert_element_type(object, target)
        if _mesh_maybe_set[0] and out is object and copy is not False:
            from plax.sharding_eager import placed_copy  # JAX 0.10: a copy, placed as it is
            out = placed_copy(out)
    elif has_jax_array(object):
        return array_from_jax_array(object, lambda v: array(v, dtype, copy, order, ndmin), dtype)
    elif isinstance(object, (list, tuple)) and _has_traced(object):
        object = unwrap_leaves(object)  # (JAX reads each item's __jax_array__ once)
        if not _has_traced(object):
            return array(object, dtype, copy, order, ndmin)
        leaves = _sequence_leaves(object)
        dt = target if target is not None else dtypes.result_type(*leaves)
        out = _join_traced_rows(object, dt)
    elif isinstance(object, dtypes.PY_SCALAR_TYPES):
        out = from_host(object, dtype=target)
    elif object is None:
        # JAX's exact words: custom pytrees rebuilt from None leaves print them (custom_pytrees.md)
        raise ValueError("None is not a valid value for jnp.array")
    else:
        if isinstance(object, (list, tuple)):
            if not object and target is None:
                target = dtypes.default_float_dtype()
            host = _host_from_sequence(object, target)
        elif isinstance(object, (bytearray, memoryview)):
            host = np.asarray(object)  # a buffer of bytes: uint8, as NumPy reads it
        elif not isinstance(object, (np.ndarray, np.generic)) and _on_a_device(object):
            # a CuPy/PyTorch GPU array: viewed (or copied) on its GPU, never through the host
            from plax.dlpack import exporter_platform, import_array
            out = import_array(object, exporter_platform(object), copy=True if copy else None)
            return out if target is None else lax.convert_element_type(out, target)
        elif hasattr(object, "__array__") or isinstance(object, (np.ndarray, np.generic)):
            host = np.asarray(object)
        elif hasattr(object, "__dlpack__"):
            host = np.from_dlpack(object)
        else:
            raise TypeError(f"Unexpected input type for array: {type(object).__name__} "
                            f"({object!r}); expected an array, a scalar, or nested sequences.")
        if target is None and is_float0_value(host):
            return host  # float0 values are NumPy arrays, as in JAX (plax.float0)
        out = from_host(host, dtype=target)
    if _mesh_maybe_set[0] and not isinstance(object, (Array, Tracer)):
        from plax.sharding_eager import placed_host_value  # JAX 0.10: on the set mesh, P()
        out = placed_host_value(out)
    if ndmin > out.ndim:
        out = lax.broadcast_in_dim(out, (1,) * (ndmin - out.ndim) + out.shape,
                                   tuple(range(ndmin - out.ndim, ndmin)))
    return out


def _on_a_device(obj) -> bool:
    """Whether ``obj`` exports device (not host) memory by DLPack or the CUDA array interface."""
    where = getattr(obj, "__dlpack_device__", None)
    if where is not None and hasattr(obj, "__dlpack__"):
        try:
            return int(where()[0]) != 1  # kDLCPU
        except Exception:  # noqa: BLE001 - an exporter that cannot say: read it as before
            return False
    return hasattr(obj, "__cuda_array_interface__")


def _host_from_sequence(seq, target=None) -> np.ndarray:
    """A NumPy array from nested Python lists, typed as JAX types list literals (or as
    ``target``, the requested dtype, if given)."""
    leaves: list = []

    def collect(o):
        if isinstance(o, (list, tuple, range)):
            for i in o:
                collect(i)
        else:
            leaves.append(o)

    collect(seq)
    if any(v is None for v in leaves):
        raise ValueError("None is not a valid value for jnp.array (found in a list; it has no "
                         "numeric value)")
    for v in leaves:
        if not isinstance(v, dtypes.HOST_VALUE_TYPES):
            raise TypeError(f"array(): unexpected element of type {type(v).__name__} ({v!r}) in "
                            "a list; expected numbers or arrays.")
    # JAX types a list by promoting its elements: Python scalars are weak (they take the
    # type of typed elements, else JAX's defaults), NumPy scalars and arrays are strong.
    dt = (target if target is not None else dtypes.result_type(*leaves)) if leaves else None
    if dt is not None and dtypes.is_integer(dt):
        info = np.iinfo(dt)
        for v in leaves:
            if isinstance(v, int) and not isinstance(v, bool) and not info.min <= v <= info.max:
                raise OverflowError(f"Python int {v} too large to convert to {dt.name}")
    try:
        # typed up front, so Python ints beyond int64 become floats when the type is inexact
        host = np.array(_plain(seq), dtype=dt)
    except ValueError as err:  # ragged nesting (an out-of-range value is an OverflowError)
        raise ValueError(f"array(): cannot build a rectangular array from {seq!r}: {err}") from None
    if host.dtype == object:
        raise ValueError(f"array(): cannot build a rectangular array from {seq!r}")
    return host if dt is None else host.astype(dt, copy=False)


def _plain(seq):
    """``seq`` with its ranges as lists (NumPy reads nested ranges as objects)."""
    if isinstance(seq, range):
        return list(seq)
    if isinstance(seq, (list, tuple)) and any(isinstance(o, (list, tuple, range)) for o in seq):
        return [_plain(o) for o in seq]
    return seq


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None,
            device=None, out_sharding=None):
    """Converts ``a`` to an array, without copying when it already is one of the right dtype.

    With ``device`` (a Device or Sharding), the result is placed on it, as ``device_put``.
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: asarray(a, dtype, order, copy=copy, device=device),
                                 out_sharding)
    if device is not None:
        from plax.device import device_put
        return device_put(asarray(a, dtype, order, copy=copy), device)
    if isinstance(a, (Array, Tracer)) and (dtype is None or get_aval(a).dtype == dtypes.canonicalize_dtype(dtype)):
        return a
    return array(a, dtype=dtype, copy=False, order=order or "K")


def from_dlpack(x: Any, *, device=None, copy: bool | None = None):
    """An Array from any object implementing the DLPack protocol (``__dlpack__`` and
    ``__dlpack_device__``), on the device that holds its memory.

    The memory is shared, as in JAX: a NumPy array becomes a CPU Array viewing it, a CuPy or
    PyTorch GPU tensor a GPU Array viewing it (through the GPU backend, no host copy).

    Args:
      x: the exporter.
      device: where to put the result (default: where ``x``'s memory is).
      copy: True copies (on that device); False refuses any copy; None shares when it can.

    Returns:
      An Array (64-bit values become 32-bit unless x64 is enabled, which copies).

    Raises:
      TypeError: ``x`` does not implement DLPack.
      RuntimeError: no installed backend drives the device ``x`` is on.

    Example:
      >>> jnp.from_dlpack(np.arange(3))
      Array([0, 1, 2], dtype=int32)
    """
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise TypeError(f"The array passed to from_dlpack must have __dlpack__ and "
                        f"__dlpack_device__ methods, got {type(x).__name__}.")
    from plax.dlpack import exporter_platform, import_array
    out = import_array(x, exporter_platform(x), copy)
    if device is not None:
        from plax.device import device_put
        out = device_put(out, device)
    return out


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device=None, out_sharding=None):
    """An array of ``shape`` filled with ``fill_value`` (a scalar, or an array to broadcast)."""
    if out_sharding is not None:
        return with_out_sharding(lambda: full(shape, fill_value, dtype, device=device),
                                 out_sharding)
    shape = canonicalize_shape(shape)
    if dtypes.fills_keys(fill_value, dtype):  # typed keys (plax.random.key_fill)
        return lax.full(shape, fill_value, dtype)
    if dtype is None:
        dt = dtypes.dtype(fill_value)
    else:
        dt = dtypes.check_user_dtype(dtype, "full")
    check_arraylike("full", fill_value)
    if np.ndim(fill_value) if not isinstance(fill_value, (Array, Tracer)) else get_aval(fill_value).ndim:
        from plax.numpy.util import broadcast_to
        # converted as jnp.asarray converts (a NumPy array by NumPy's cast), as JAX does
        return broadcast_to(asarray(fill_value, dtype=dt), shape)
    weak = dtype is None and dtypes.is_weakly_typed(fill_value)
    return lax.full(shape, fill_value, dt, weak_type=weak)


def zeros(shape: Any, dtype: Any = None, *, device=None, out_sharding=None):
    """An array of zeros (float32 by default)."""
    if out_sharding is not None:
        return with_out_sharding(lambda: zeros(shape, dtype, device=device), out_sharding)
    return _filled(shape, 0, dtype, "zeros")


def ones(shape: Any, dtype: Any = None, *, device=None, out_sharding=None):
    """An array of ones (float32 by default).

    Example:
      >>> jnp.ones((2, 2))
      Array([[1., 1.],
             [1., 1.]], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: ones(shape, dtype, device=device), out_sharding)
    return _filled(shape, 1, dtype, "ones")


def empty(shape: Any, dtype: Any = None, *, device=None, out_sharding=None):
    """Like :func:`zeros` (plax arrays are never uninitialised)."""
    if out_sharding is not None:
        return with_out_sharding(lambda: empty(shape, dtype, device=device), out_sharding)
    return zeros(shape, dtype)


def _default_or(dtype, name):
    return dtypes.default_float_dtype() if dtype is None else dtypes.check_user_dtype(dtype, name)


def _filled(shape, value: int, dtype, name: str):
    """``value`` in ``shape``, of ``dtype`` (float by default; a key dtype gives keys whose
    every word is ``value``, as JAX's)."""
    dt = dtype if dtypes.fills_keys(value, dtype) else _default_or(dtype, name)
    return lax.full(canonicalize_shape(shape), value, dt)


def _like(a, dtype, shape, value, name: str = "full_like"):
    """``value`` in the shape and dtype of ``a`` (or those given), sharded as JAX's
    ``lax.full_like`` shards it: traced, with ``a``'s type sharding when ``shape`` is not
    given; eagerly, placed as ``a`` is when ``a`` is committed, not weakly typed, and the
    shape is ``a``'s (or ``a`` is replicated)."""
    if has_jax_array(a) and not (hasattr(a, "dtype") and hasattr(a, "shape")):
        a = a.__jax_array__()  # (JAX 0.10 reads a wrapper's array here, once)
    if dtypes.fills_keys(a, None):
        # a key array: keys of its shape (or ``shape``) and key dtype, or numbers of ``dtype``
        return lax.full_like(a, value, dtype, shape)
    check_arraylike(name, a)
    host = not isinstance(a, (Array, Tracer))  # no sharding to follow (placed or not)
    a = asarray(a)
    aval = get_aval(a)
    dt = aval.dtype if dtype is None else dtypes.check_user_dtype(dtype, "full_like")
    new_shape = aval.shape if shape is None else canonicalize_shape(shape)
    weak = dtype is None and aval.weak_type
    if type(value) not in dtypes.PY_SCALAR_TYPES and np.ndim(value) != 0:
        # an array fill: broadcast to the shape (JAX's jnp.full_like)
        from plax.numpy.util import broadcast_to
        out = broadcast_to(asarray(value, dtype=dt), new_shape)
    elif shape is None and isinstance(a, Tracer) and getattr(aval, "sharding", None) is not None:
        # the one broadcast_in_dim typed with the operand's sharding, as JAX stages it
        from plax.sharding_types import broadcasts_typed
        with broadcasts_typed(aval.sharding, len(new_shape)):
            return lax.full(new_shape, value, dt, weak_type=weak)
    else:
        out = lax.full(new_shape, value, dt, weak_type=weak)
    if isinstance(a, Tracer):
        return vary_like(out, a)  # inside shard_map: varying as `a` is (JAX's pvary)
    if host or (type(a) is Array and not a._committed):
        if _mesh_maybe_set[0] and type(out) is Array:
            # a scalar: lax.full ran no operation to place it; placed as JAX's result is
            from plax.sharding_eager import placed_results
            return placed_results([out])[0]
        return out  # (the usual case: nothing more to do)
    return _placed_like(out, a, new_shape, weak)


def _placed_like(out, a, new_shape, weak: bool):
    """``out`` placed as the committed array ``a`` is (JAX's eager ``full_like``)."""
    sharding = getattr(a, "sharding", None)
    if sharding is None or weak or not getattr(a, "_committed", True):
        return out
    if _mesh_maybe_set[0]:  # replicated on the set mesh: the spec as a's is written
        from plax.sharding_eager import placed_like
        placed = placed_like(out, sharding)
        if placed is not None:
            return placed
    if tuple(new_shape) != tuple(a.shape) and not sharding.is_fully_replicated:
        return out
    from plax.device import device_put
    return device_put(out, sharding)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device=None, out_sharding=None):
    """Zeros with the shape and dtype of ``a``."""
    if out_sharding is not None:
        return with_out_sharding(lambda: zeros_like(a, dtype, shape, device=device), out_sharding)
    return _like(a, dtype, shape, 0, "zeros_like")


def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device=None, out_sharding=None):
    """Ones with the shape and dtype of ``a``."""
    if out_sharding is not None:
        return with_out_sharding(lambda: ones_like(a, dtype, shape, device=device), out_sharding)
    return _like(a, dtype, shape, 1, "ones_like")


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *, device=None, out_sharding=None):
    """Like :func:`zeros_like`."""
    if out_sharding is not None:
        return with_out_sharding(lambda: empty_like(prototype, dtype, shape, device=device), out_sharding)
    return _like(prototype, dtype, shape, 0, "ones_like")  # (the name JAX 0.10.2's error gives)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device=None,
              out_sharding=None):
    """``fill_value`` with the shape and dtype of ``a``."""
    if out_sharding is not None:
        return with_out_sharding(lambda: full_like(a, fill_value, dtype, shape, device=device),
                                 out_sharding)
    return _like(a, dtype, shape, fill_value)


def _concrete_scalar(x, name):
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is None:
            from plax import errors
            raise errors.ConcretizationTypeError(
                x, f"The {name} argument of jnp.arange must be concrete: the result's shape "
                   "depends on it.")
        x = v
    if isinstance(x, Array):
        x = x.item()
    return x


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device=None,
           out_sharding=None):
    """Evenly spaced values in ``[start, stop)`` (arguments must be concrete).

    Example:
      >>> jnp.arange(3)
      Array([0, 1, 2], dtype=int32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: arange(start, stop, step, dtype, device=device),
                                 out_sharding)
    start = _concrete_scalar(start, "start")
    stop = _concrete_scalar(stop, "stop") if stop is not None else None
    step = _concrete_scalar(step, "step") if step is not None else None
    if stop is None:  # arange(n) and arange(n, step=s) both count from 0 to n, as JAX
        start, stop = 0, start
    explicit_step = step is not None
    step = 1 if step is None else step
    if step == 0:  # JAX's exception type: its length computation divides by the step
        raise ZeroDivisionError("arange: step must not be zero")
    if dtype is None:
        dt = dtypes.result_type(*(v for v in (start, stop, step) if v is not None))
        dt = dtypes.canonicalize_dtype(dt)
    else:
        dt = dtypes.check_user_dtype(dtype, "arange")
    # JAX 0.10's formula, so that values (and jaxprs) agree: an iota, scaled by the step
    # (computed in float32 for narrower floats) and shifted by the start.
    n = max(0, math.ceil((stop - start) / step))
    if explicit_step:
        work = np.dtype(np.float32) if dtypes.is_float(dt) and dt.itemsize < 4 else dt
        scaled = lax.mul(lax.convert_element_type(step, work), lax.iota(work, n))
        return lax.convert_element_type(
            lax.add(lax.convert_element_type(start, work), scaled), dt)
    if start == 0:
        return lax.iota(dt, n)
    return lax.add(lax.convert_element_type(start, dt), lax.iota(dt, n))


@jit_when_traced(name="_linspace",
                 static_argnames=("num", "endpoint", "retstep", "dtype", "axis", "device"))
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device=None):
    """``num`` evenly spaced samples from ``start`` to ``stop`` (traceable in start and stop).

    Example:
      >>> jnp.linspace(0, 1, 5)
      Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    import operator
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"linspace: num must be an integer, got {num!r}") from None
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    from plax.numpy.util import promote_args_inexact
    from plax.numpy.ufuncs import add, multiply, subtract, divide
    from plax.numpy.shape_ops import expand_dims, moveaxis
    start_a, stop_a = promote_args_inexact("linspace", start, stop)
    from plax.numpy.util import broadcast_shapes, broadcast_to
    bshape = broadcast_shapes(get_aval(start_a).shape, get_aval(stop_a).shape)
    start_a, stop_a = broadcast_to(start_a, bshape), broadcast_to(stop_a, bshape)
    dt = get_aval(start_a).dtype if dtype is None else dtypes.check_user_dtype(dtype, "linspace")
    compute = dtypes.promote_types(get_aval(start_a).dtype, dtypes.default_float_dtype())
    compute = dtypes.canonicalize_dtype(compute)
    start_a, stop_a = to_dtype(start_a, compute), to_dtype(stop_a, compute)
    bshape = get_aval(start_a).shape
    div = (num - 1) if endpoint else num
    steps = lax.convert_element_type(lax.iota(np.int32, num), compute)
    steps = lax.broadcast_in_dim(steps, (num,) + bshape, (0,))
    delta = subtract(stop_a, start_a)
    if div > 0:
        step = divide(delta, lax.full((), div, compute))
        out = add(expand_dims(start_a, 0), multiply(steps, expand_dims(step, 0)))
        if endpoint and num > 1:
            out = lax.concatenate([lax.slice_in_dim(out, 0, num - 1), expand_dims(stop_a, 0)], 0)
    else:
        step = lax.full(bshape, np.nan, compute)
        out = lax.broadcast_in_dim(start_a, (num,) + bshape, tuple(range(1, len(bshape) + 1)))
    out = moveaxis(out, 0, axis) if bshape else out
    if dtypes.is_integer(dt):
        from plax.numpy.ufuncs import floor
        out = floor(out)
    out = lax.convert_element_type(out, dt)
    return (out, step) if retstep else out


def logspace(start, stop, num: int = 50, endpoint: bool = True, base: float = 10.0, dtype=None,
             axis: int = 0):
    """Numbers spaced evenly on a log scale: ``base ** linspace(start, stop, num)``.

    Args:
      start, stop: the exponents of the end points.
      num: how many values.
      endpoint: whether ``base ** stop`` is included.
      base: the base of the logarithm.
      dtype: the result dtype (default: floating).
      axis: where the samples axis goes when ``start``/``stop`` are arrays.

    Returns:
      ``num`` values.

    Example:
      >>> jnp.logspace(0, 2, 3)
      Array([  1.,  10., 100.], dtype=float32)
    """
    from plax.numpy.ufuncs import power
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    out = power(lax.full((), base, get_aval(lin).dtype), lin)
    return out if dtype is None else lax.convert_element_type(out, dtypes.check_user_dtype(dtype, "logspace"))


def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """Numbers spaced evenly on a log scale between ``start`` and ``stop`` (same sign).

    Args:
      start, stop: the end points (non-zero, of one sign).
      num: how many values.
      endpoint: whether ``stop`` is included.
      dtype: the result dtype (default: floating).
      axis: where the samples axis goes when ``start``/``stop`` are arrays.

    Returns:
      ``num`` values forming a geometric progression.

    Example:
      >>> jnp.geomspace(1, 100, 3)
      Array([  1.,  10., 100.], dtype=float32)
    """
    check_arraylike("geomspace", start, stop)
    from plax.numpy.ufuncs import abs as jabs, log10, multiply, sign
    start_a, stop_a = asarray(start), asarray(stop)
    # as JAX: a base-10 logspace between the magnitudes, with the sign of start
    lin = logspace(log10(jabs(start_a)), log10(jabs(stop_a)), num, endpoint=endpoint, axis=axis)
    signs = sign(start_a)
    if get_aval(signs).ndim:  # one sign per sequence: broadcast along the samples axis
        from plax.numpy.shape_ops import expand_dims
        from plax.numpy.util import canonicalize_axis
        signs = expand_dims(signs, canonicalize_axis(axis, get_aval(lin).ndim))
    out = multiply(signs, lin)
    return out if dtype is None else lax.convert_element_type(out, dtypes.check_user_dtype(dtype, "geomspace"))


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device=None):
    """A 2-D array with ones on diagonal ``k`` and zeros elsewhere."""
    import operator
    M = N if M is None else M
    try:
        N, M = operator.index(N), operator.index(M)
    except TypeError:
        raise TypeError(f"eye: N and M must be integers, got N={N!r}, M={M!r}") from None
    try:
        k = operator.index(k)
    except TypeError:  # (a ValueError for k, as JAX raises)
        raise ValueError(f"eye: k must be a scalar integer, got {k!r}") from None
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got N={N}, M={M}")
    dt = _default_or(dtype, "eye")
    # a diagonal beyond the matrix is all zeros; clamping keeps a huge k within int32
    k = max(-N, min(M, k))
    rows = lax.broadcasted_iota(np.int32, (N, M), 0)
    cols = lax.broadcasted_iota(np.int32, (N, M), 1)
    on = lax.eq(lax.add(rows, lax.full((), k, np.int32)), cols)
    return lax.convert_element_type(on, dt)


def identity(n: int, dtype: Any = None):
    """The ``n`` x ``n`` identity matrix."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None):
    """Ones at and below diagonal ``k``, zeros above."""
    M = N if M is None else M
    rows = lax.broadcasted_iota(np.int32, (N, M), 0)
    cols = lax.broadcasted_iota(np.int32, (N, M), 1)
    return lax.convert_element_type(lax.ge(lax.add(rows, lax.full((), k, np.int32)), cols),
                                    _default_or(dtype, "tri"))


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate matrices from coordinate vectors (``indexing`` "xy" or "ij")."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing!r}")
    arrays = [asarray(x) for x in xi]
    for a in arrays:
        if get_aval(a).ndim != 1:
            raise ValueError(f"meshgrid expects 1-D arrays, got shape {get_aval(a).shape}")
    shape = [get_aval(a).shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and len(arrays) >= 2 and i < 2:
            axis = 1 - i
        if sparse:
            s = [1] * len(arrays)
            s[axis] = shape[axis]
            out.append(lax.reshape(a, tuple(s)))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (axis,)))
    return out


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False):
    """An array of grid indices: ``indices((2, 3))[0]`` holds the row of each position."""
    dimensions = canonicalize_shape(dimensions)
    dt = dtypes.default_int_dtype() if dtype is None else dtypes.check_user_dtype(dtype, "indices")
    grids = [lax.broadcasted_iota(dt, dimensions, i) for i in range(len(dimensions))]
    if sparse:
        out = []
        for i, d in enumerate(dimensions):
            s = [1] * len(dimensions)
            s[i] = d
            out.append(lax.reshape(lax.iota(dt, d), tuple(s)))
        return tuple(out)
    from plax.numpy.shape_ops import stack
    return stack(grids) if grids else zeros((0,), dt)


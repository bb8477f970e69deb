"""Type conversion primitives: convert_element_type, bitcast_convert_type, and stop_gradient."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from plax import dtypes
from plax.array import _PROMOTED, Array, _PendingArray, _trace_state, from_host
from plax.core.primitive import Primitive
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer
from plax.lax.base import asarray, aval_of
from plax.transforms.batching import defvectorized, move_axis_to
from plax.transforms.jvp import Zero, defzero

convert_element_type_p = Primitive("convert_element_type")
register_fusible(convert_element_type_p, ELEMENTWISE)


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x, *, new_dtype, weak_type):
    if new_dtype not in dtypes.supported_dtypes and new_dtype != dtypes.float0:
        raise TypeError(f"convert_element_type: unsupported target dtype {new_dtype!r}")
    return ShapedArray(x.shape, new_dtype, weak_type)


def convert_element_type(operand, new_dtype, weak_type: bool = False):
    """Casts ``x`` to ``new_dtype`` elementwise (complex to real keeps the real part, with a warning).

    Example:
      >>> lax.convert_element_type(jnp.array([1.7]), jnp.int32)
      Array([1], dtype=int32)
    """
    warned = False
    old_dtype = getattr(operand, "dtype", None)
    if old_dtype is not None and not isinstance(old_dtype, np.dtype):  # a key array
        return _convert_key(operand, old_dtype, new_dtype)
    new_dtype = dtypes.canonicalize_dtype(new_dtype, allow_extended_dtype=True)
    if not isinstance(operand, (Array, Tracer)):
        if operand is None:  # a ValueError, as JAX raises for None here
            raise ValueError("convert_element_type: None is not a valid operand (it has no "
                             "numeric value)")
        if isinstance(new_dtype, np.dtype) and not weak_type:
            if isinstance(operand, (complex, np.complexfloating)) and new_dtype.kind != "c":
                # warned before NumPy's TypeError for a Python complex, as JAX warns
                _warn_complex_to_real()
                warned = True
            host = cast_host_scalar(operand, new_dtype)
            if host is not None:
                return from_host(host, weak_type=False)
        operand = asarray(operand)
    aval = aval_of(operand)
    if not isinstance(new_dtype, np.dtype):  # a PRNG key dtype: JAX's ValueError
        raise ValueError(f"Cannot convert_element_type from {aval.dtype} to {new_dtype} "
                         "(key arrays are made from their data by random.wrap_key_data)")
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return operand
    if dtypes.is_complex(aval.dtype) and not dtypes.is_complex(new_dtype) and not warned:
        _warn_complex_to_real()
    folded = _fold_host_scalar(operand, aval, new_dtype, weak_type)
    if folded is not None:
        return folded
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=bool(weak_type))


# The host scalars JAX converts with NumPy rather than with the primitive.
_HOST_SCALAR_TYPES = (bool, int, float, complex, np.generic)


def cast_host_scalar(value: Any, new_dtype: np.dtype) -> np.ndarray | None:
    """A host scalar converted to ``new_dtype`` on the host the way JAX converts it, or None
    where JAX converts it with the ``convert_element_type`` primitive instead.

    JAX 0.10.2 converts a Python or NumPy scalar with NumPy when the target is strongly
    typed: a Python int by ``astype`` (so ``-1`` becomes 255 as uint8, and ``2**40`` wraps
    as int32), any other scalar by ``np.asarray(value, dtype)`` (a Python float truncates
    toward zero; a Python complex to a real dtype is NumPy's ``TypeError``; a NumPy scalar
    takes NumPy's cast). The primitive, which saturates (NaN to 0), converts the rest: a
    NaN or infinity to an integer type, a Python float out of the integer type's range
    (NumPy's ``OverflowError``), arrays, and every weakly typed target (callers do not ask
    this function for those).

    Args:
      value: the value to convert (anything: only host scalars are converted).
      new_dtype: the canonical target dtype (float0 gives None; not a key dtype).

    Returns:
      A 0-d NumPy array of ``new_dtype``, or None.

    Raises:
      TypeError: a Python complex cast to a real dtype (NumPy's message, as in JAX).
      OverflowError: a Python int too large for NumPy (``2**70``).

    Example:
      >>> cast_host_scalar(-1, np.dtype(np.uint8))
      array(255, dtype=uint8)
      >>> cast_host_scalar(300.0, np.dtype(np.uint8)) is None  # out of range: the primitive
      True
    """
    if not isinstance(value, _HOST_SCALAR_TYPES) or new_dtype == dtypes.float0:
        return None
    if type(value) is int:
        return np.asarray(value).astype(new_dtype)
    old_dtype = np.result_type(value)
    if old_dtype not in dtypes.supported_dtypes:  # a string, a datetime, float0: not numbers
        return None
    if dtypes.is_inexact(old_dtype) and dtypes.is_integer(new_dtype) and \
            not np.isfinite(value):
        return None
    try:
        with warnings.catch_warnings():
            # (the caller warns of a complex value cast to a real dtype, as JAX does)
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            return np.asarray(value, dtype=new_dtype)
    except OverflowError:
        return None


def _warn_complex_to_real() -> None:
    warnings.warn("Casting complex values to real discards the imaginary part",
                  np.exceptions.ComplexWarning, stacklevel=3)


def _convert_key(keys, key_dtype, new_dtype):
    """A key array converted to ``new_dtype``: itself when that is its own key dtype, else
    JAX's ValueError (a key's data is read by ``random.key_data``, not by a cast)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype, allow_extended_dtype=True)
    if new_dtype == key_dtype:
        return keys
    raise ValueError(f"Cannot convert_element_type from {key_dtype} to {new_dtype} (a key "
                     "array's data is read by random.key_data)")


def _fold_host_scalar(x, aval: ShapedArray, new_dtype, weak_type) -> Array | None:
    """While tracing, the conversion of a host scalar done on the host, or None.

    JAX converts Python and NumPy scalars at trace time, so ``x * jnp.float32(2)`` records
    the literal ``2.0:f32[]``, not a ``convert_element_type`` of it. Like JAX, it keeps the
    equation for a weakly typed target, float0, and a non-finite float cast to an integer.
    """
    if not _trace_state.depth or aval.shape != () or weak_type or new_dtype == dtypes.float0:
        return None
    if type(x) is not _PendingArray:
        return None
    host = x._pending_host()
    if host is None or host is _PROMOTED:
        return None
    if dtypes.is_inexact(aval.dtype) and dtypes.is_integer(new_dtype) and \
            not np.all(np.isfinite(host)):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # warned above
        value = np.asarray(host).astype(new_dtype)
    return from_host(value, x._device, committed=x._committed, dtype=new_dtype, weak_type=False)


defvectorized(convert_element_type_p)


@register_rule("jvp", convert_element_type_p)
def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is Zero or not (dtypes.is_inexact(new_dtype) and dtypes.is_inexact(aval_of(x).dtype)):
        return out, Zero.from_primal(out)
    t_out = t
    if aval_of(t).dtype != new_dtype or aval_of(t).weak_type != weak_type:
        if dtypes.is_complex(aval_of(t).dtype) and not dtypes.is_complex(new_dtype):
            from plax.lax.unary import real
            t = real(t)
        t_out = convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)
    return out, t_out


@register_rule("transpose", convert_element_type_p)
def _convert_transpose(ct, x, *, new_dtype, weak_type):
    if type(ct) is Zero:
        return [None]
    old = x.aval.dtype
    if dtypes.is_complex(aval_of(ct).dtype) and not dtypes.is_complex(old):
        from plax.lax.unary import real
        ct = real(ct)
    if aval_of(ct).dtype == old and aval_of(ct).weak_type == x.aval.weak_type:
        return [ct]
    # The operand's weak type comes back too (as in JAX): a Python float promoted to float32
    # gets a weakly typed cotangent.
    return [convert_element_type_p.bind(ct, new_dtype=old, weak_type=x.aval.weak_type)]


bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_abstract_eval(x, *, new_dtype):
    for d in (x.dtype, new_dtype):
        if (dtypes.is_bool(d) or dtypes.is_complex(d)) and x.dtype != new_dtype:
            raise TypeError(f"bitcast_convert_type does not support bool or complex values unless "
                            f"the operand and destination types match; got operand dtype "
                            f"{x.dtype.name} and new_dtype {new_dtype.name}.")
    old_size, new_size = x.dtype.itemsize, new_dtype.itemsize
    if old_size == new_size:
        shape = x.shape
    elif old_size > new_size:
        if old_size % new_size:
            raise TypeError(f"bitcast_convert_type: cannot bitcast {x.dtype.name} to {new_dtype.name}")
        shape = x.shape + (old_size // new_size,)
    else:
        ratio = new_size // old_size
        if not x.shape or x.shape[-1] != ratio:
            raise TypeError(f"bitcast_convert_type from {x.dtype.name} to {new_dtype.name} requires "
                            f"the last dimension to be {ratio}, got shape {x.shape}")
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype, False)


def bitcast_convert_type(operand, new_dtype):
    """Reinterprets the bits of ``x`` as ``new_dtype``; a size change adds or removes a last axis."""
    return bitcast_convert_type_p.bind(asarray(operand), new_dtype=dtypes.canonicalize_dtype(new_dtype))


defzero(bitcast_convert_type_p)
# Same-width bitcasts are elementwise; a width change adds or removes the last axis, so its
# operand and output shapes differ and the fusion rule keeps it out of clusters
# (plax.lowering.fusion: an elementwise equation reads operands of its shape or scalars).
register_fusible(bitcast_convert_type_p, ELEMENTWISE)


@register_rule("batch", bitcast_convert_type_p)
def _bitcast_batch(vals, dims, *, new_dtype):
    (x,), (d,) = vals, dims
    x = move_axis_to(x, d, 0, aval_of(x).shape[d])
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), 0


stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
defvectorized(stop_gradient_p)
defzero(stop_gradient_p)


def stop_gradient(x):
    """The identity, with a zero derivative: gradients do not flow through ``x`` (a pytree).

    Example:
      >>> jax.grad(lambda x: x * lax.stop_gradient(x))(3.)
      Array(3., dtype=float32, weak_type=True)
    """
    from plax import tree_util

    def stop(leaf):
        leaf = asarray(leaf)
        if not dtypes.is_inexact(aval_of(leaf).dtype):
            return leaf
        return stop_gradient_p.bind(leaf)

    return tree_util.tree_map(stop, x)

"""Operators and methods of arrays, installed on both :class:`plax.Array` and
:class:`plax.core.Tracer` so that ``x + y`` means the same thing eagerly and under any
transform. ``register_array_methods`` runs once, when plax.numpy is imported."""
from __future__ import annotations

import numpy as np

from plax import dtypes, lax
from plax.numpy import indexing, products, reductions, shape_ops, ufuncs
from plax.core.trace import Tracer
from plax.state.primitives import ref_get
from plax.state.types import AbstractRef


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _defer(fn):
    """Binary operator: return NotImplemented for operands plax does not know (lets Python try
    the other operand's reflected method)."""
    from plax.array import Array
    from plax.numpy.jax_array_protocol import unwrapped_operand
    from plax.numpy.util import is_arraylike

    def op(self, other):
        if type(other) is not Array and not is_arraylike(other):
            other = unwrapped_operand(other)  # JAX 0.10 reads __jax_array__ here
            if not is_arraylike(other):
                return NotImplemented
        return fn(self, other)
    op.__name__ = fn.__name__
    return op


def _astype(self, dtype, copy: bool = False, device=None):
    """The array cast to ``dtype``."""
    return lax.convert_element_type(self, dtypes.check_user_dtype(dtype, "astype"))


def _to_device(self, device, *, stream=None):
    """A copy of the array placed on ``device`` (a Device or Sharding), as JAX."""
    if stream is not None:
        raise NotImplementedError("stream argument of array.to_device()")
    from plax.device import device_put
    return device_put(self, device)


def _reshape(self, *shape, order: str = "C", out_sharding=None):
    """The array with a new shape (``x.reshape(2, 3)`` or ``x.reshape((2, 3))``; under
    explicit sharding ``out_sharding=`` says the result's sharding, as in JAX)."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) and not hasattr(shape[0], "__index__"):
        shape = shape[0]
    return shape_ops.reshape(self, shape, order, out_sharding=out_sharding)


def _transpose(self, *axes):
    """The array with axes permuted (reversed by default)."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return shape_ops.transpose(self, axes or None)


def _item(self, *args):
    import numpy
    return numpy.asarray(self).item(*args)


def _round(self, decimals: int = 0, out=None):
    return ufuncs.round(self, decimals, out)


def _matmul(a, b):
    return products.matmul(a, b)


def _getitem(self, idx):
    return indexing.getitem(self, idx)


def _tracer_addupdate(self, x, idx=()):
    """``ref.addupdate(x, idx)`` of a traced ref (plax.state); arrays have no such method."""
    if type(self.aval) is not AbstractRef:
        raise AttributeError(f"{type(self).__name__!r} object has no attribute 'addupdate' (it "
                             "is a method of refs made by plax.new_ref)")
    from plax.state.primitives import ref_addupdate
    ref_addupdate(self, idx, x)


def _tracer_getitem(self, idx):
    # a traced ref (plax.state) is read by the ``get`` primitive, an array indexed
    if type(self.aval) is AbstractRef:
        return ref_get(self, idx)
    return indexing.getitem(self, idx)


def _at(self):
    """Functional updates: ``x.at[idx].set(y)``, ``.add``, ``.multiply``, ``.min``, ``.max``, ``.get``."""
    return indexing._IndexUpdateHelper(self)


def _mT(self):
    return shape_ops.matrix_transpose(self)


def _T(self):
    return shape_ops.transpose(self)


def _real(self):
    return ufuncs.real(self)


def _imag(self):
    return ufuncs.imag(self)


def _flatten(self, order: str = "C"):
    return shape_ops.ravel(self, order)


def _squeeze(self, axis=None):
    return shape_ops.squeeze(self, axis)


def _clip(self, min=None, max=None, **kwargs):
    return ufuncs.clip(self, min, max, **kwargs)


def _dot(self, b, **kwargs):
    return products.dot(self, b, **kwargs)


def _swapaxes(self, a, b):
    return shape_ops.swapaxes(self, a, b)


def _conj(self):
    return ufuncs.conjugate(self)


def _take(self, indices, axis=None, **kwargs):
    return shape_ops.take(self, indices, axis, **kwargs)


def _repeat(self, repeats, axis=None, **kwargs):
    return shape_ops.repeat(self, repeats, axis, **kwargs)


def _argsort(self, axis=-1, **kwargs):
    from plax.numpy.searching import argsort
    return argsort(self, axis, **kwargs)


def _sort(self, axis=-1, **kwargs):
    from plax.numpy.searching import sort
    return sort(self, axis, **kwargs)


def _nonzero(self, **kwargs):
    from plax.numpy.searching import nonzero
    return nonzero(self, **kwargs)


def _diagonal(self, offset=0, axis1=0, axis2=1):
    return shape_ops.diagonal(self, offset, axis1, axis2)


def _trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return shape_ops.trace(self, offset, axis1, axis2, dtype, out)


def _view(self, dtype=None, type=None):
    if dtype is None:
        return self
    return lax.bitcast_convert_type(self, dtype)


def _copy(self, order=None):
    return self


# the operators call the ufuncs' keyword-free forms: no out=/where= to check on `x + y`
_add, _sub, _mul, _and, _or, _xor, _neg = (f.call_positional for f in (
    ufuncs.add, ufuncs.subtract, ufuncs.multiply, ufuncs.bitwise_and, ufuncs.bitwise_or,
    ufuncs.bitwise_xor, ufuncs.negative))

_operators = {
    "__add__": _defer(_add), "__radd__": _defer(_reflected(_add)),
    "__sub__": _defer(_sub), "__rsub__": _defer(_reflected(_sub)),
    "__mul__": _defer(_mul), "__rmul__": _defer(_reflected(_mul)),
    "__truediv__": _defer(ufuncs.true_divide), "__rtruediv__": _defer(_reflected(ufuncs.true_divide)),
    "__floordiv__": _defer(ufuncs.floor_divide), "__rfloordiv__": _defer(_reflected(ufuncs.floor_divide)),
    "__mod__": _defer(ufuncs.remainder), "__rmod__": _defer(_reflected(ufuncs.remainder)),
    "__divmod__": _defer(ufuncs.divmod), "__rdivmod__": _defer(_reflected(ufuncs.divmod)),
    "__pow__": _defer(ufuncs.power), "__rpow__": _defer(_reflected(ufuncs.power)),
    "__matmul__": _defer(_matmul), "__rmatmul__": _defer(_reflected(_matmul)),
    "__and__": _defer(_and), "__rand__": _defer(_reflected(_and)),
    "__or__": _defer(_or), "__ror__": _defer(_reflected(_or)),
    "__xor__": _defer(_xor), "__rxor__": _defer(_reflected(_xor)),
    "__lshift__": _defer(ufuncs.left_shift), "__rlshift__": _defer(_reflected(ufuncs.left_shift)),
    "__rshift__": _defer(ufuncs.right_shift), "__rrshift__": _defer(_reflected(ufuncs.right_shift)),
    "__eq__": _defer(ufuncs.equal), "__ne__": _defer(ufuncs.not_equal),
    "__lt__": _defer(ufuncs.less), "__le__": _defer(ufuncs.less_equal),
    "__gt__": _defer(ufuncs.greater), "__ge__": _defer(ufuncs.greater_equal),
    "__neg__": _neg, "__pos__": ufuncs.positive, "__abs__": ufuncs.abs,
    "__invert__": ufuncs.invert, "__round__": _round, "__getitem__": _getitem,
}

_methods = {
    "astype": _astype, "reshape": _reshape, "transpose": _transpose, "item": _item,
    "sum": reductions.sum, "mean": reductions.mean, "max": reductions.max, "min": reductions.min,
    "prod": reductions.prod, "argmax": reductions.argmax, "argmin": reductions.argmin,
    "std": reductions.std, "var": reductions.var, "any": reductions.any, "all": reductions.all,
    "cumsum": reductions.cumsum, "cumprod": reductions.cumprod, "ptp": reductions.ptp,
    "clip": _clip, "round": _round, "flatten": _flatten, "ravel": _flatten, "squeeze": _squeeze,
    "dot": _dot, "swapaxes": _swapaxes, "conj": _conj, "conjugate": _conj, "take": _take,
    "repeat": _repeat, "argsort": _argsort, "sort": _sort, "nonzero": _nonzero,
    "diagonal": _diagonal, "trace": _trace, "view": _view, "copy": _copy,
    "to_device": _to_device,
}

_properties = {"at": _at, "T": _T, "mT": _mT, "real": _real, "imag": _imag}


def register_array_methods(*classes) -> None:
    """Installs the operators, methods and properties above on each class."""
    for cls in classes:
        for name, fn in _operators.items():
            setattr(cls, name, fn)
        for name, fn in _methods.items():
            setattr(cls, name, fn)
        for name, fn in _properties.items():
            setattr(cls, name, property(fn))
        if issubclass(cls, Tracer):
            cls.__getitem__ = _tracer_getitem
            cls.addupdate = _tracer_addupdate
        # __eq__ without __hash__ would make instances unhashable implicitly; keep the explicit
        # TypeError-raising __hash__ of each class.

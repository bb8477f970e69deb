"""Products of plax.numpy: dot, matmul, vdot, inner, outer, tensordot, kron, cross, vecdot,
einsum. All are built on ``lax.dot_general``."""
from __future__ import annotations

import numpy as np

from plax import dtypes, lax
from plax.array import Array
from plax.core.trace import get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import (canonicalize_axis, check_arraylike, reject_out, converted_first,
                              promote_dtypes)
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.sharding_types import with_out_sharding


def _prep(name, a, b, preferred_element_type):
    if not (type(a) is Array and type(b) is Array and a.aval.dtype == b.aval.dtype
            and a.aval.weak_type == b.aval.weak_type):  # else promotion changes nothing
        check_arraylike(name, a, b)
        a, b = promote_dtypes(a, b)
    # JAX's products ask for the promoted type when none is given (as its jaxprs show); on
    # two concrete Arrays of one type that changes nothing, and leaving it out keeps the eager
    # product as fast as before (a product's params are part of its dispatch key)
    if preferred_element_type is None:
        if type(a) is Array and type(b) is Array:
            return a, b, None
        return a, b, get_aval(a).dtype
    return a, b, dtypes.canonicalize_dtype(preferred_element_type)


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """NumPy's ``dot``: scalars multiply; 1-D . 1-D is the inner product; otherwise the last
    axis of ``a`` is contracted with the second-to-last of ``b`` (the last if ``b`` is 1-D).

    Example:
      >>> jnp.dot(jnp.array([[1., 2.], [3., 4.]]), jnp.array([1., 1.]))
      Array([3., 7.], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: dot(a, b, precision=precision,
                                             preferred_element_type=preferred_element_type),
                                 out_sharding)
    a, b, pet = _prep("dot", a, b, preferred_element_type)
    an, bn = get_aval(a).ndim, get_aval(b).ndim
    if an == 0 or bn == 0:
        from plax.numpy.ufuncs import multiply
        if _mesh_maybe_set[0]:  # JAX's one dot_general keeps host operands' P()
            from plax.sharding_eager import computed_as_one
            return computed_as_one(multiply, (a, b))
        return multiply(a, b)
    contract_b = 0 if bn == 1 else bn - 2
    return lax.dot_general(a, b, (((an - 1,), (contract_b,)), ((), ())), precision, pet)


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product with NumPy's broadcasting of leading (batch) axes.

    Example:
      >>> jnp.matmul(jnp.ones((5, 2, 3)), jnp.ones((3, 4))).shape
      (5, 2, 4)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: matmul(a, b, precision=precision,
                                                preferred_element_type=preferred_element_type),
                                 out_sharding)
    if _mesh_maybe_set[0]:  # JAX's one jit keeps host operands' P(); plax's steps would not
        from plax.sharding_eager import computed_as_one
        return computed_as_one(lambda a, b: _matmul(a, b, precision, preferred_element_type),
                               (a, b))
    return _matmul(a, b, precision, preferred_element_type)


def _matmul(a, b, precision, preferred_element_type):
    a, b, pet = _prep("matmul", a, b, preferred_element_type)
    a_shape, b_shape = get_aval(a).shape, get_aval(b).shape
    if not a_shape or not b_shape:
        raise ValueError(f"matmul: inputs must have at least one dimension, got shapes "
                         f"{a_shape} and {b_shape}")
    a_vec, b_vec = len(a_shape) == 1, len(b_shape) == 1
    if a_vec:
        a = lax.reshape(a, (1,) + a_shape)
    if b_vec:
        b = lax.reshape(b, b_shape + (1,))
    a_shape, b_shape = get_aval(a).shape, get_aval(b).shape
    if a_shape[-1] != b_shape[-2]:
        # JAX raises a TypeError here (from dot_general), so plax does too
        raise TypeError(f"matmul: the contracted dimensions differ: a has shape "
                        f"{get_aval(a).shape} (last axis {a_shape[-1]}) and b has shape "
                        f"{get_aval(b).shape} (axis -2 of size {b_shape[-2]}); they must be "
                        "equal.")
    from plax.numpy.util import broadcast_shapes, broadcast_to
    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    a = broadcast_to(a, batch + a_shape[-2:])
    b = broadcast_to(b, batch + b_shape[-2:])
    nb = len(batch)
    out = lax.dot_general(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))),
                          precision, pet)
    if a_vec:
        out = lax.squeeze(out, (nb,))
    if b_vec:
        out = lax.squeeze(out, (get_aval(out).ndim - 1,))
    return out


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Dot product of the flattened arrays, conjugating ``a``."""
    from plax.numpy.ufuncs import conjugate
    from plax.numpy.shape_ops import ravel
    a = conjugate(a)
    return dot(ravel(a), ravel(b), precision=precision, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """Conjugated dot product of vectors along ``axis``, broadcasting the other axes.

    Args:
      x1, x2: arrays whose ``axis`` has the same length (other axes broadcast).
      axis: the axis holding the vectors.

    Returns:
      ``sum(conj(x1) * x2, axis)`` in the promoted dtype (not widened as ``sum`` would).

    Example:
      >>> jnp.vecdot(jnp.array([1., 2.]), jnp.array([3., 4.]))
      Array(11., dtype=float32)
    """
    from plax.numpy.shape_ops import broadcast_arrays, moveaxis
    from plax.numpy.ufuncs import conjugate
    x1, x2, pet = _prep("vecdot", x1, x2, preferred_element_type)
    n1, n2 = get_aval(x1).ndim, get_aval(x2).ndim
    if n1 == 0 or n2 == 0:
        raise ValueError(f"vecdot requires arrays with at least one dimension, got shapes "
                         f"{get_aval(x1).shape} and {get_aval(x2).shape}")
    x1 = moveaxis(x1, canonicalize_axis(axis, n1), -1)
    x2 = moveaxis(x2, canonicalize_axis(axis, n2), -1)
    if get_aval(x1).shape[-1] != get_aval(x2).shape[-1]:
        raise ValueError(f"vecdot: the vector axes have different sizes: shapes "
                         f"{get_aval(x1).shape} and {get_aval(x2).shape} (after moving axis "
                         f"{axis} last)")
    x1, x2 = broadcast_arrays(conjugate(x1), x2)
    nd = get_aval(x1).ndim
    batch = tuple(range(nd - 1))
    return lax.dot_general(x1, x2, (((nd - 1,), (nd - 1,)), (batch, batch)), precision, pet)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Sum product over the last axes of ``a`` and ``b``."""
    a, b, pet = _prep("inner", a, b, preferred_element_type)
    an, bn = get_aval(a).ndim, get_aval(b).ndim
    if an == 0 or bn == 0:
        from plax.numpy.ufuncs import multiply
        return multiply(a, b)
    return lax.dot_general(a, b, (((an - 1,), (bn - 1,)), ((), ())), precision, pet)


def outer(a, b, out=None):
    """Outer product of the flattened arrays (``out``: only None, as in JAX)."""
    from plax.numpy.shape_ops import ravel
    from plax.numpy.ufuncs import multiply
    reject_out(out, "outer")
    a, b = ravel(a), ravel(b)
    return multiply(lax.expand_dims(a, (1,)), lax.expand_dims(b, (0,)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Contracts the last ``axes`` axes of ``a`` with the first of ``b`` (or the given pairs;
    ``out_sharding``: the result's explicit sharding)."""
    if out_sharding is not None:
        return with_out_sharding(lambda: tensordot(a, b, axes, precision=precision,
                                                   preferred_element_type=preferred_element_type),
                                 out_sharding)
    a, b = converted_first(a, b)
    a, b, pet = _prep("tensordot", a, b, preferred_element_type)
    an, bn = get_aval(a).ndim, get_aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(an, bn):
            raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks ({an} and {bn})")
        ca, cb = tuple(range(an - n, an)), tuple(range(n))
    else:
        if len(axes) != 2:
            raise TypeError(f"tensordot axes argument must be an int or a pair of sequences, "
                            f"got {axes!r}")
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        if len(ax_a) != len(ax_b):
            raise TypeError(f"tensordot requires axes lists to have equal length, got {axes}")
        ca = tuple(canonicalize_axis(i, an) for i in ax_a)
        cb = tuple(canonicalize_axis(i, bn) for i in ax_b)
    return lax.dot_general(a, b, ((ca, cb), ((), ())), precision, pet)


@jit_when_traced
def kron(a, b):
    """Kronecker product."""
    from plax.numpy.ufuncs import multiply
    from plax.numpy.util import asarray_weak
    a, b = asarray_weak(a), asarray_weak(b)
    sa, sb = get_aval(a).shape, get_aval(b).shape
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    a = lax.reshape(a, tuple(x for d in sa for x in (d, 1)))
    b = lax.reshape(b, tuple(x for d in sb for x in (1, d)))
    out = multiply(a, b)
    return lax.reshape(out, tuple(x * y for x, y in zip(sa, sb)))


@jit_when_traced(static_argnames=("axisa", "axisb", "axisc", "axis"))
def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """Cross product of 3-vectors (or 2-vectors) along the given axes."""
    from plax.numpy.shape_ops import moveaxis, stack
    from plax.numpy.ufuncs import multiply, subtract
    from plax.numpy.util import asarray_weak
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(asarray_weak(a), axisa, -1)
    b = moveaxis(asarray_weak(b), axisb, -1)
    if get_aval(a).shape[-1] not in (2, 3) or get_aval(b).shape[-1] not in (2, 3):
        raise ValueError("incompatible dimensions for cross product (dimension must be 2 or 3)")
    def comp(x, i):
        n = get_aval(x).shape[-1]
        if i >= n:
            return lax.full(get_aval(x).shape[:-1], 0, get_aval(x).dtype)
        return lax.index_in_dim(x, i, get_aval(x).ndim - 1, keepdims=False)
    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    c2 = subtract(multiply(a0, b1), multiply(a1, b0))
    if get_aval(a).shape[-1] == 2 and get_aval(b).shape[-1] == 2:
        return c2
    c0 = subtract(multiply(a1, b2), multiply(a2, b1))
    c1 = subtract(multiply(a2, b0), multiply(a0, b2))
    return moveaxis(stack([c0, c1, c2], -1), -1, axisc)


def einsum(subscripts: str, /, *operands, out=None, optimize=None, precision=None,
           preferred_element_type=None, _dot_general=None, out_sharding=None):
    """Einstein summation, e.g. ``einsum("ij,jk->ik", a, b)``, contracted pairwise left to right.

    Supports explicit and implicit output, ``...`` broadcasting, repeated indices within one
    operand (diagonals) and any number of operands. ``out`` is only None (as in JAX).
    """
    reject_out(out, "einsum")
    if out_sharding is not None:
        return with_out_sharding(
            lambda: einsum(subscripts, *operands, optimize=optimize, precision=precision,
                           preferred_element_type=preferred_element_type,
                           _dot_general=_dot_general), out_sharding)
    from plax.numpy._einsum import einsum as _einsum
    operands = converted_first(*operands)
    return _einsum(subscripts, *operands, precision=precision,
                   preferred_element_type=preferred_element_type)



def _shape(x) -> tuple:
    return get_aval(x).shape if hasattr(x, "aval") else np.shape(x)


def _correlate_1d(name: str, a, v, mode: str, convolve: bool, precision, preferred_element_type):
    """1-D correlation (or, with ``convolve``, convolution) of ``a`` and ``v`` as a
    conv_general_dilated: the full result, then NumPy's slice for ``mode``."""
    from plax.numpy.util import to_dtype, to_inexact_dtype
    check_arraylike(name, a, v)
    sa, sv = _shape(a), _shape(v)
    if len(sa) != 1 or len(sv) != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if sa[0] == 0 or sv[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {sa} and {sv}.")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode must be one of 'full', 'same' or 'valid', got {mode!r}.")
    dt, weak = dtypes.result_type(a, v, return_weak_type_flag=True)
    dt = to_inexact_dtype(dt)
    a, v = to_dtype(a, dt, weak), to_dtype(v, dt, weak)
    n, m = sa[0], sv[0]
    if convolve:
        v = lax.rev(v, (0,))
    elif dtypes.is_complex(get_aval(v).dtype):
        v = lax.conj(v)
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    full = lax.conv_general_dilated(lax.reshape(a, (1, 1, n)), lax.reshape(v, (1, 1, m)), (1,),
                                    [(m - 1, m - 1)], precision=precision,
                                    preferred_element_type=pet)
    full = lax.reshape(full, (n + m - 1,))
    k = min(n, m)
    if mode == "full":
        return full
    if mode == "valid":
        start, size = k - 1, abs(n - m) + 1
    elif convolve or n >= m:
        start, size = (k - 1) // 2, max(n, m)
    else:  # NumPy correlates the longer operand with the shorter and reverses
        start, size = n - 1 - (n - 1) // 2, m
    return lax.slice(full, (start,), (start + size,))


@jit_when_traced(static_argnames=("mode", "precision", "preferred_element_type"))
def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None) -> Array:
    """Discrete linear convolution of two 1-D arrays (NumPy's ``convolve``).

    Args:
      a, v: 1-D, non-empty arrays (promoted to a common inexact dtype, as in JAX).
      mode: ``"full"`` (``n + m - 1`` values), ``"same"`` (``max(n, m)``, centred) or
        ``"valid"`` (``|n - m| + 1``, full overlap only).
      precision, preferred_element_type: passed to :func:`plax.lax.conv_general_dilated`.

    Returns:
      The convolution.

    Example:
      >>> jnp.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]))
      Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    return _correlate_1d("convolve", a, v, mode, True, precision, preferred_element_type)


@jit_when_traced(static_argnames=("mode", "precision", "preferred_element_type"))
def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None) -> Array:
    """Cross-correlation of two 1-D arrays (NumPy's ``correlate``: ``v`` is conjugated).

    Args:
      a, v: 1-D, non-empty arrays (promoted to a common inexact dtype, as in JAX).
      mode: ``"valid"`` (default), ``"same"`` or ``"full"``, as in :func:`convolve`.
      precision, preferred_element_type: passed to :func:`plax.lax.conv_general_dilated`.

    Returns:
      The correlation.

    Example:
      >>> jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]), "full")
      Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float32)
    """
    return _correlate_1d("correlate", a, v, mode, False, precision, preferred_element_type)

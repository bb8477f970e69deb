"""Windowed reductions: reduce_window_sum, reduce_window_max, reduce_window_min.

Each output element reduces one window of the operand, after the operand is dilated by
``base_dilation`` and padded (padding and holes hold the reduction's identity). Sum is
linear; its transpose is another windowed sum of the padded, stride-dilated cotangent.
Max and min differentiate through the window element they select: the tangent's window
patches are built from pad and strided slices, and the first maximal (minimal) element of
each window is picked by argmax (argmin), so every rule composes from primitives that
have their own.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import ANY, NUMBER, asarray, aval_of, check_dtype
from plax.lax.convolution import padtype_to_pads
from plax.transforms.jvp import Zero, deflinear


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else (n - 1) * d + 1


def window_output_shape(shape, window_dimensions, window_strides, padding, base_dilation,
                        window_dilation) -> tuple:
    """The shape of a windowed reduction's result (arguments already canonical)."""
    out = []
    for n, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                         base_dilation, window_dilation):
        span = _dilate(n, bd) + lo + hi - _dilate(w, wd)
        out.append(span // s + 1 if span >= 0 else 0)
    return tuple(out)


def _check_window_params(name, x, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    for what, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("padding", padding), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)):
        if len(v) != x.ndim:
            raise TypeError(f"{name} got the wrong number of {what} for operand: got operand "
                            f"shape {x.shape} with {what} {v}.")
    for what, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if any(d < 1 for d in v):
            raise TypeError(f"{name} {what} must be positive, got {v} for operand shape "
                            f"{x.shape}.")


def _window_prim(name: str, allowed) -> Primitive:
    p = Primitive(name)

    def abstract_eval(x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
        check_dtype(name, x, allowed)
        _check_window_params(name, x, window_dimensions, window_strides, padding,
                             base_dilation, window_dilation)
        shape = window_output_shape(x.shape, window_dimensions, window_strides, padding,
                                    base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    p.def_abstract_eval(abstract_eval)

    def batch(vals, dims, *, window_dimensions, window_strides, padding, base_dilation,
              window_dilation):
        (x,), (d,) = vals, dims

        def ins(t, v):
            return tuple(t[:d]) + (v,) + tuple(t[d:])

        out = p.bind(x, window_dimensions=ins(window_dimensions, 1),
                     window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                     base_dilation=ins(base_dilation, 1), window_dilation=ins(window_dilation, 1))
        return out, d

    register_rule("batch", p)(batch)
    return p


reduce_window_sum_p = _window_prim("reduce_window_sum", NUMBER)
# complex operands compare lexicographically, as JAX's max/min (plax.lowering.complex_extremes)
reduce_window_max_p = _window_prim("reduce_window_max", ANY)
reduce_window_min_p = _window_prim("reduce_window_min", ANY)


def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    from plax.lax.shape import pad
    if type(ct) is Zero:
        return [None]
    shape = x.aval.shape
    config = []
    for k, n in enumerate(shape):
        w = _dilate(window_dimensions[k], window_dilation[k])
        m = _dilate(aval_of(ct).shape[k], window_strides[k])
        lo = w - 1 - padding[k][0]
        hi = _dilate(n, base_dilation[k]) + w - 1 - m - lo
        config.append((lo, hi, window_strides[k] - 1))
    padded = pad(ct, B.full_like_scalar(0, ct), config)
    # the all-ones window is its own flip: the cotangent is a windowed sum, strided by the
    # base dilation
    out = reduce_window_sum_p.bind(
        padded, window_dimensions=tuple(window_dimensions), window_strides=tuple(base_dilation),
        padding=((0, 0),) * len(shape), base_dilation=(1,) * len(shape),
        window_dilation=tuple(window_dilation))
    return [out]


deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)


def reduction_identity(dtype, which: str):
    """The identity of a window reduction in ``dtype``: what padding and dilation holes hold.

    Args:
      dtype: the operand's dtype.
      which: ``"sum"``, ``"max"`` or ``"min"``.

    Returns:
      A Python scalar: 0 for a sum; for max/min the dtype's lowest/highest value (-inf/inf for
      floats and for the real part of complex numbers, False/True for bool).

    Example:
      >>> reduction_identity(np.int8, "max")
      -128
    """
    if which == "sum":
        return 0
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return which == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min if which == "max" else info.max)
    return -np.inf if which == "max" else np.inf


def reduce_window_array(x, which: str, *, window_dimensions, window_strides, padding,
                        base_dilation, window_dilation, xp=None):
    """The value of ``reduce_window_{sum,max,min}`` on a host or device array, for the
    backends' kernels: ``x`` dilated and padded with the reduction's identity (one strided
    copy), a strided window view of it (no copy), one reduction over the window axes.
    16-bit floats reduce in float32; integers wrap; NaN propagates through max and min.

    Args:
      x: a host or device array.
      which: ``"sum"``, ``"max"`` or ``"min"``.
      window_dimensions, window_strides, padding, base_dilation, window_dilation: the
        primitive's parameters (one per axis).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      One reduction per window position, C-contiguous, of ``x``'s dtype.

    Example:
      >>> reduce_window_array(np.arange(5.0), "max", window_dimensions=(2,),
      ...                     window_strides=(2,), padding=((0, 1),), base_dilation=(1,),
      ...                     window_dilation=(1,))
      array([1., 3., 4.])
    """
    from plax.lax.convolution import dilate_and_pad, window_view
    xp = np if xp is None else xp
    dtype = np.dtype(x.dtype)
    compute = np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind in "fV" else dtype
    x = x.astype(compute, copy=False)
    axes = tuple(range(x.ndim))
    if dtype.kind == "c" and which != "sum" and x.ndim:
        return _complex_extreme_windows(x, which == "max", axes, window_dimensions,
                                        window_strides, padding, base_dilation,
                                        window_dilation, xp)
    x = dilate_and_pad(x, axes, base_dilation, padding, reduction_identity(compute, which),
                       xp=xp)
    if x.ndim == 0:
        return x.astype(dtype, copy=True)
    shape = window_output_shape(x.shape, window_dimensions, window_strides,
                                ((0, 0),) * x.ndim, (1,) * x.ndim, window_dilation)
    if 0 in shape:  # some axis is shorter than one window: an empty result
        return xp.zeros(shape, dtype)
    view = window_view(x, axes, window_dimensions, window_strides, window_dilation, shape, xp=xp)
    w_axes = tuple(range(x.ndim, 2 * x.ndim))
    if which == "sum":
        out = view.sum(axis=w_axes, dtype=compute)
    else:
        out = view.max(axis=w_axes) if which == "max" else view.min(axis=w_axes)
    return xp.ascontiguousarray(out.astype(dtype, copy=False))


def _complex_extreme_windows(x, is_max: bool, axes, window_dimensions, window_strides,
                             padding, base_dilation, window_dilation, xp):
    """``reduce_window_max``/``min`` of a complex array as XLA computes it: JAX's
    lexicographic max/min folded over each window's elements in row-major order from the
    identity, the padding and the holes of a base dilation skipped (not folded as the
    identity: with NaNs and ties that would change the result)."""
    from plax.lax.convolution import dilate_and_pad, window_view
    from plax.lowering.complex_extremes import reduce_extreme
    z = dilate_and_pad(x, axes, base_dilation, padding, 0, xp=xp)
    valid = dilate_and_pad(xp.ones(x.shape, bool), axes, base_dilation, padding, False, xp=xp)
    shape = window_output_shape(z.shape, window_dimensions, window_strides,
                                ((0, 0),) * z.ndim, (1,) * z.ndim, window_dilation)
    if 0 in shape:
        return xp.zeros(shape, x.dtype)
    windows = [window_view(a, axes, window_dimensions, window_strides, window_dilation, shape,
                           xp=xp).reshape(shape + (-1,)) for a in (z, valid)]
    return xp.ascontiguousarray(reduce_extreme(windows[0], is_max, xp, valid=windows[1]))


def _patches(x, fill, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
    """The operand's windows, stacked on a new last axis (one entry per window element)."""
    from plax.lax.shape import concatenate, expand_dims, pad
    from plax.lax.slicing import slice as slice_
    a = aval_of(x)
    cfg = [(lo, hi, bd - 1) for (lo, hi), bd in zip(padding, base_dilation)]
    xp = pad(x, B.full_like_scalar(fill, x), cfg)
    out_shape = window_output_shape(a.shape, window_dimensions, window_strides, padding,
                                    base_dilation, window_dilation)
    if 0 in out_shape:  # no windows (the slices below could start past the end)
        from plax.lax.shape import full
        return full(out_shape + (int(np.prod(window_dimensions)),), fill, a.dtype)
    parts = []
    for offs in itertools.product(*(range(w) for w in window_dimensions)):
        start = [o * d for o, d in zip(offs, window_dilation)]
        limit = [st + (m - 1) * s + 1 if m else st
                 for st, m, s in zip(start, out_shape, window_strides)]
        parts.append(expand_dims(slice_(xp, start, limit, window_strides), (a.ndim,)))
    return concatenate(parts, a.ndim)


def _chooser_jvp(prim, which: str):
    def rule(primals, tangents, **params):
        from plax.lax.convert import convert_element_type
        from plax.lax.reduction import argmax, argmin, reduce_sum
        from plax.lax.shape import broadcast_in_dim, broadcasted_iota
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if type(t) is Zero or not dtypes.is_inexact(aval_of(x).dtype):
            return out, Zero.from_primal(out)
        xs = _patches(x, reduction_identity(aval_of(x).dtype, which), **params)
        ts = _patches(t, 0, **params)
        k = aval_of(xs).ndim - 1
        pick = (argmax if which == "max" else argmin)(xs, k, np.int32)
        iota = broadcasted_iota(np.int32, aval_of(xs).shape, k)
        pick = broadcast_in_dim(pick, aval_of(xs).shape, tuple(range(k)))
        hit = convert_element_type(B.eq(iota, pick), aval_of(ts).dtype)
        return out, reduce_sum(B.mul(ts, hit), (k,))

    register_rule("jvp", prim)(rule)


_chooser_jvp(reduce_window_max_p, "max")
_chooser_jvp(reduce_window_min_p, "min")


def _canonical(x, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    nd = aval_of(x).ndim
    window_dimensions = tuple(int(w) for w in window_dimensions)
    window_strides = tuple(int(s) for s in window_strides)
    base_dilation = (1,) * nd if base_dilation is None else tuple(int(d) for d in base_dilation)
    window_dilation = (1,) * nd if window_dilation is None else tuple(int(d) for d in window_dilation)
    if isinstance(padding, str):
        if len(window_dimensions) != nd or len(window_strides) != nd:
            raise TypeError(f"reduce_window got the wrong number of window_dimensions or "
                            f"window_strides for operand: got operand shape "
                            f"{aval_of(x).shape} with window_dimensions {window_dimensions} "
                            f"and window_strides {window_strides}.")
        # as in JAX, "SAME" is computed on the dilated operand and the dilated window
        padding = padtype_to_pads(
            [_dilate(n, d) for n, d in zip(aval_of(x).shape, base_dilation)],
            [_dilate(w, d) for w, d in zip(window_dimensions, window_dilation)],
            window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    return dict(window_dimensions=window_dimensions, window_strides=window_strides,
                padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


def _is_identity(init, which: str, dtype) -> bool:
    try:
        v = np.asarray(init)
    except Exception:  # a tracer: not a known constant
        return False
    if v.shape != ():
        return False
    if which in ("sum", "prod"):
        return bool(v == (0 if which == "sum" else 1))
    return bool(v == reduction_identity(dtype, which)) or (np.dtype(dtype).kind == "f" and bool(
        v == (-np.inf if which == "max" else np.inf)))


def reduce_window(operand, init_value, computation: Callable,
                  window_dimensions: Sequence[int], window_strides: Sequence[int], padding,
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None):
    """Reduces each window of ``operand`` with ``computation`` (``lax.add``, ``lax.mul``,
    ``lax.max`` or ``lax.min``, with its identity as ``init_value``).

    Args:
      operand: the array.
      init_value: a scalar combined once into every window's result; usually the
        reduction's identity (0 for add, 1 for mul, ``-inf`` or the dtype's minimum for max,
        ``inf`` or the dtype's maximum for min), which padding and holes hold.
      computation: ``lax.add``, ``lax.mul``, ``lax.max`` or ``lax.min``.
      window_dimensions: the window's size along every axis.
      window_strides: the step between windows along every axis.
      padding: ``"SAME"``, ``"VALID"`` or ``(low, high)`` pairs (padding holds the identity).
      base_dilation: operand dilation (holes hold the identity); default ones.
      window_dilation: window dilation; default ones.

    Returns:
      The reduced windows.

    Raises:
      NotImplementedError: for other computations (JAX's general ``reduce_window`` with
        an arbitrary traced computation is not provided).

    Example:
      >>> lax.reduce_window(jnp.arange(5.), 0., lax.add, (2,), (1,), "VALID")
      Array([1., 3., 5., 7.], dtype=float32)
    """
    x = asarray(operand)
    params = _canonical(x, window_dimensions, window_strides, padding, base_dilation,
                        window_dilation)
    which = {B.add: "sum", B.max: "max", B.min: "min", B.mul: "prod"}.get(computation)
    if which is None:
        raise NotImplementedError(f"reduce_window supports the computations lax.add, lax.mul, "
                                  f"lax.max and lax.min, got {computation!r}.")
    if which == "prod":
        # no dedicated primitive (JAX uses its general reduce_window): the product of the
        # window patches, differentiated through reduce_prod
        from plax.lax.reduction import reduce_prod
        out = reduce_prod(_patches(x, 1, **params), (aval_of(x).ndim,))
    else:
        prim = {"sum": reduce_window_sum_p, "max": reduce_window_max_p,
                "min": reduce_window_min_p}[which]
        out = prim.bind(x, **params)
    if _is_identity(init_value, which, aval_of(x).dtype):
        return out
    # another initial value enters each window's reduction once (padding and holes still
    # count as the identity, as JAX computes it)
    init = asarray(init_value)
    if aval_of(init).shape != ():
        raise TypeError(f"reduce_window init_value must be a scalar, got shape "
                        f"{aval_of(init).shape}.")
    from plax.lax.convert import convert_element_type
    init = convert_element_type(init, aval_of(x).dtype)
    return computation(out, init)


def _window_op(prim: Primitive, doc: str):
    def op(operand, window_dimensions: Sequence[int], window_strides: Sequence[int], padding,
           base_dilation: Sequence[int] | None = None,
           window_dilation: Sequence[int] | None = None):
        x = asarray(operand)
        return prim.bind(x, **_canonical(x, window_dimensions, window_strides, padding,
                                         base_dilation, window_dilation))
    op.__name__ = prim.name
    op.__doc__ = doc
    return op


reduce_window_sum = _window_op(reduce_window_sum_p, """Sum over each window (see
:func:`reduce_window`; padding holds zeros).

Example:
  >>> reduce_window_sum(jnp.ones((4,)), (2,), (2,), "VALID")
  Array([2., 2.], dtype=float32)
""")
reduce_window_max = _window_op(reduce_window_max_p, """Maximum over each window (see
:func:`reduce_window`; padding holds ``-inf`` or the dtype's minimum).""")
reduce_window_min = _window_op(reduce_window_min_p, """Minimum over each window (see
:func:`reduce_window`; padding holds ``inf`` or the dtype's maximum).""")

"""Selection primitives: select_n (choose among cases elementwise) and clamp."""
from __future__ import annotations

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.primitive import Primitive
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import ORDERED, asarray, aval_of, check_dtype, same_dtypes
from plax.transforms.jvp import Zero, defjvp, instantiate

select_n_p = Primitive("select_n")
register_fusible(select_n_p, ELEMENTWISE)


@select_n_p.def_abstract_eval
def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select_n requires at least one case")
    if which.dtype != np.dtype(bool) and which.dtype != np.dtype(np.int32):
        raise TypeError(f"select_n's selector must be bool or int32, got {which.dtype.name}")
    if which.dtype == np.dtype(bool) and len(cases) > 2:
        raise TypeError(f"select_n with a bool selector takes at most 2 cases, got {len(cases)}")
    dt = same_dtypes("select_n", cases)
    case_shape = cases[0].shape
    for c in cases[1:]:
        if c.shape != case_shape:
            raise TypeError(f"select_n cases must have the same shapes, got "
                            f"{[c.shape for c in cases]}.")
    if which.shape and which.shape != case_shape:
        raise TypeError(f"select_n's selector must be a scalar or have the cases' shape "
                        f"{case_shape}, got {which.shape}.")
    return ShapedArray(case_shape, dt, all(c.weak_type for c in cases))


def select_n(which, *cases):
    """Elementwise ``cases[which]``: ``which`` is bool (two cases) or int32, scalar or case-shaped.

    Example:
      >>> lax.select_n(jnp.array([True, False]), jnp.zeros(2), jnp.ones(2))
      Array([1., 0.], dtype=float32)
    """
    return select_n_p.bind(asarray(which), *map(asarray, cases))


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` is True, else ``on_false`` (JAX's lax.select)."""
    return select_n(pred, on_false, on_true)


def _select_n_batch(vals, dims):
    # As JAX's rule: operands batched along one axis (a case-shaped selector) stay where they
    # are; an unbatched scalar selector picks among the cases moved to axis 0; otherwise the
    # selector, then each case, goes to axis 0 (unbatched ones broadcast along it, with NumPy
    # ints), and a selector that is a scalar per example gets the cases' shape.
    from plax.lax.shape import broadcast_in_dim
    from plax.transforms.batching import axis_size, bdim_at_front
    which, *cases = vals
    dw, *dcs = dims
    size = axis_size(vals, dims)
    if dw is not None and all(d == dw for d in dcs) and \
            aval_of(which).shape == aval_of(cases[0]).shape:
        return select_n_p.bind(which, *cases), dw
    if dw is None and aval_of(which).ndim == 0:
        return select_n_p.bind(which, *[bdim_at_front(c, d, size)
                                        for c, d in zip(cases, dcs)]), 0
    which = bdim_at_front(which, dw, size)
    cases = [bdim_at_front(c, d, size) for c, d in zip(cases, dcs)]
    case_shape = aval_of(cases[0]).shape
    if aval_of(which).shape != case_shape:  # a selector that is a scalar per example
        which = broadcast_in_dim(which, case_shape, (0,))
    return select_n_p.bind(which, *cases), 0


register_rule("batch", select_n_p)(_select_n_batch)


@register_rule("jvp", select_n_p)
def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n(which, *cases)
    case_tangents = tangents[1:]
    if all(type(t) is Zero for t in case_tangents):
        return out, Zero.from_primal(out)
    return out, select_n(which, *[instantiate(t) for t in case_tangents])


@register_rule("transpose", select_n_p)
def _select_n_transpose(ct, which, *cases):
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(which):
        raise TypeError("select_n is not linear in its selector")
    if type(ct) is Zero:
        return [None] * (len(cases) + 1)
    zeros = B.zeros_like(ct)
    out = [None]
    for i, c in enumerate(cases):
        if is_undefined_primal(c):
            branches = [zeros] * len(cases)
            branches[i] = ct
            out.append(select_n(which, *branches))
        else:
            out.append(None)
    return out


clamp_p = Primitive("clamp")
register_fusible(clamp_p, ELEMENTWISE)


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    check_dtype("clamp", x, ORDERED)  # (complex operands: lax.clamp, below)
    same_dtypes("clamp", [lo, x, hi])
    for bound, what in ((lo, "min"), (hi, "max")):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {what} to be a scalar or have the operand's shape "
                            f"{x.shape}, got {bound.shape}.")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def clamp(min, x, max):
    """Elementwise ``minimum(maximum(x, min), max)``; ``min``/``max`` are scalars or x-shaped.

    Complex operands are clamped as XLA clamps them (JAX 0.10.2): only the real parts are
    compared, and a NaN fails the comparison: ``x`` is raised to ``min`` where
    ``min.real >= x.real``, then lowered to ``max`` unless its real part is ``<= max.real``.
    That is computed from other primitives (no backend needs a complex clamp kernel) and,
    as in JAX, has no derivative.

    Args:
      min: the lower bound (a scalar, or of ``x``'s shape).
      x: the operand.
      max: the upper bound (a scalar, or of ``x``'s shape).

    Returns:
      The clamped values, of ``x``'s shape and dtype.

    Example:
      >>> lax.clamp(np.complex64(0j), np.complex64([1 + 1j, -1 + 5j, 3 - 1j]), np.complex64(2))
      Array([1.+1.j, 0.+0.j, 2.+0.j], dtype=complex64)
    """
    lo, x, hi = asarray(min), asarray(x), asarray(max)
    if dtypes.is_complex(aval_of(x).dtype):
        _clamp_abstract_eval(*(ShapedArray(aval_of(v).shape, np.dtype(np.float32))
                               for v in (lo, x, hi)))  # (the shapes' rules)
        same_dtypes("clamp", [aval_of(v) for v in (lo, x, hi)])
        return _complex_clamp()(lo, x, hi)
    return clamp_p.bind(lo, x, hi)


_complex_clamp_fn = []


def _complex_clamp():
    """XLA's complex clamp from select_n on real-part comparisons, as a custom_jvp whose
    derivative is refused with JAX's TypeError (made at first use: no import cycle)."""
    if not _complex_clamp_fn:
        from plax.transforms.custom_derivatives import custom_jvp

        @custom_jvp
        def complex_clamp(lo, x, hi):
            from plax.lax.shape import broadcast_in_dim
            from plax.lax.unary import real_p
            shape = aval_of(x).shape
            lo, hi = (b if aval_of(b).shape == shape else broadcast_in_dim(b, shape, ())
                      for b in (lo, hi))
            re = real_p.bind
            raised = select_n(B.ge(re(lo), re(x)), x, lo)
            return select_n(B.le(re(raised), re(hi)), hi, raised)

        @complex_clamp.defjvp
        def _refused(primals, tangents):
            dtype = aval_of(primals[1]).dtype
            raise TypeError(f"gt does not accept dtype {dtype} at position 0: clamp of complex "
                            "values (which compares their real parts) has no derivative, as "
                            "in JAX; clamp the real and imaginary parts as real arrays to "
                            "differentiate.")
        _complex_clamp_fn.append(complex_clamp)
    return _complex_clamp_fn[0]


@register_rule("batch", clamp_p)
def _clamp_batch(vals, dims):
    # x moves to batch axis 0; a bound stays a scalar only if it is unbatched and rank 0,
    # otherwise it gets x's batched shape.
    from plax.lax.shape import broadcast_in_dim
    from plax.transforms.batching import axis_size, move_axis_to
    (lo, x, hi), (dlo, dx, dhi) = vals, dims
    size = axis_size(vals, dims)
    x = move_axis_to(x, dx, 0, size)
    shape = aval_of(x).shape

    def fit(bound, d):
        if d is None and aval_of(bound).ndim == 0:
            return bound
        bound = move_axis_to(bound, d, 0, size)
        if aval_of(bound).shape != shape:
            bound = broadcast_in_dim(bound, shape, (0,))
        return bound

    return clamp_p.bind(fit(lo, dlo), x, fit(hi, dhi)), 0


def _zeros_of(x):
    return B.zeros_like(x)


def _clamp_jvp_min(t, lo, x, hi):
    t = _fit(t, x)
    return select(B.bitwise_and(B.gt(lo, x), B.lt(lo, hi)), t, _zeros_of(t))


def _clamp_jvp_x(t, lo, x, hi):
    return select(B.bitwise_and(B.gt(x, lo), B.lt(x, hi)), t, _zeros_of(t))


def _clamp_jvp_max(t, lo, x, hi):
    t = _fit(t, x)
    return select(B.lt(hi, x), t, _zeros_of(t))


def _fit(t, x):
    from plax.lax.shape import broadcast_in_dim
    if t.shape != x.shape:
        return broadcast_in_dim(t, x.shape, ())
    return t


defjvp(clamp_p, _clamp_jvp_min, _clamp_jvp_x, _clamp_jvp_max)

"""``scan`` and ``map``: the ``scan`` primitive, a loop over the leading axis of its inputs.

``scan`` takes ``num_consts`` loop-invariant values, ``num_carry`` carry values, then the
scanned inputs (leading axis ``length``); ``jaxpr`` maps ``(consts, carry, x slices)`` to
``(carry, y slices)`` and the primitive returns the final carry and the stacked ``ys``.
Rules:

* JVP: a scan of the body's JVP (every inexact carry and output gets a tangent). In reverse
  mode that JVP body is split into a primal scan, which also stacks the residuals of every
  step as extra outputs, and a linear scan of the tangent part over those residuals.
* transpose: a scan in the opposite direction whose carry holds the cotangents of the
  carry and the running sums of the cotangents of the linear loop-invariant inputs, and
  whose outputs are the cotangents of the linear scanned inputs.
* batching: every carry component is batched on axis 0, scanned inputs on axis 1.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from plax import dtypes
from plax.core.interpret import jaxpr_as_fun
from plax.core import varying
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.core.trace import get_aval
from plax.lax.base import asarray
from plax.lax.control_flow.common import (batched_fun, carry_types, check_carry,
                                          is_inexact_aval, memo, promote_weak, same_type,
                                          stage_derived, trace_flat, widen_varying,
                                          with_varying)
from plax.pytrees.engine import tree_flatten, tree_unflatten
from plax.sharding_types import (check_scanned_unsplit, scanned_slice_sharding,
                                 stacked_sharding)
from plax.lowering.bodies import register_body_kernel, run_scan
from plax.transforms.batching import register_program_primitive
from plax.transforms.jvp import Zero, instantiate, jvp_flat, tangent_aval, zeros_like_aval
from plax.transforms.staging import LinearizeTrace, is_linearize_tracer

scan_p = Primitive("scan", multiple_results=True)


def _unstacked(aval: ShapedArray) -> ShapedArray:
    return ShapedArray(aval.shape[1:], aval.dtype, aval.weak_type, aval.vma,
                       None if aval.sharding is None else scanned_slice_sharding(aval))


def _stacked(aval: ShapedArray, length: int) -> ShapedArray:
    return ShapedArray((length,) + tuple(aval.shape), aval.dtype, aval.weak_type, aval.vma,
                       None if aval.sharding is None else stacked_sharding(aval))


def _scan_abstract_eval(*avals, jaxpr: ClosedJaxpr, length: int, reverse: bool, unroll,
                        num_consts: int, num_carry: int):
    body_in = jaxpr.in_avals
    if len(avals) != len(body_in):
        raise TypeError(f"scan takes {len(body_in)} operands, got {len(avals)}")
    n_fixed = num_consts + num_carry
    for a, b in zip(avals[:n_fixed], body_in[:n_fixed]):
        if not same_type(a, b):
            raise TypeError(f"scan operand of type {a.str_short()} does not match the body's "
                            f"input {b.str_short()}")
    for a, b in zip(avals[n_fixed:], body_in[n_fixed:]):
        if a.shape != (length,) + tuple(b.shape) or a.dtype != b.dtype:
            raise TypeError(f"scan input of type {a.str_short()} does not match the body's "
                            f"slice {b.str_short()} stacked {length} times")
    outs = jaxpr.out_avals
    carry_in, carry_out = body_in[num_consts:n_fixed], outs[:num_carry]
    if any(not same_type(a, b) for a, b in zip(carry_in, carry_out)):
        raise TypeError(f"scan carry of types {[a.str_short() for a in carry_in]} does not "
                        f"match the body's outputs {[a.str_short() for a in carry_out]}")
    return carry_types(carry_in, carry_out) + [_stacked(a, length) for a in outs[num_carry:]]


scan_p.def_abstract_eval(_scan_abstract_eval)
varying.register_self_typed(scan_p)  # results typed by the traced body
register_program_primitive(scan_p)
# its bodies run with the backend and on the device of the program holding it
register_body_kernel(scan_p, run_scan)


# ------------------------------------------------------------------ user functions

def _length_of(xs_leaves: list, length) -> int:
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"scan `length` argument must be a non-negative Python int, got "
                            f"{length!r} of type {type(length).__name__}.")
        length = int(length)
        if length < 0:
            raise ValueError(f"scan `length` argument must be non-negative, got {length}.")
    sizes = []
    for x in xs_leaves:
        shape = get_aval(x).shape
        if not shape:
            raise ValueError(f"scan got a value with no leading axis to scan over: an input "
                             f"of shape {shape}.")
        sizes.append(shape[0])
    if sizes and any(s != sizes[0] for s in sizes):
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(str(s) for s in sizes)}.")
    if length is None:
        if not sizes:
            raise ValueError("scan got no values to scan over and `length` not provided.")
        return sizes[0]
    if sizes and sizes[0] != length:
        raise ValueError(f"scan got `length` argument of {length} which disagrees with leading "
                         f"axis sizes {sizes[:1]}.")
    return length


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loops ``carry, y = f(carry, x)`` over the leading axis of ``xs``, as one ``scan``
    primitive; returns the final carry and the ``y`` values stacked.

    Differentiable in forward and reverse mode.

    Args:
      f: ``(carry, x) -> (carry, y)``, the carry keeping its structure and types.
      init: the initial carry (a pytree).
      xs: a pytree of arrays sharing a leading axis, or None (then ``length`` is needed and
        ``x`` is None).
      length: the number of steps (checked against ``xs``).
      reverse: run from the last slice to the first (``ys`` stay in input order).
      unroll: accepted for JAX compatibility (how many steps a backend may unroll).

    Returns:
      ``(final carry, stacked ys)``.

    Example:
      >>> lax.scan(lambda c, x: (c + x, c * x), 0.0, jnp.arange(3.0))
      (Array(3., dtype=float32), Array([0., 0., 2.], dtype=float32))
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be callable.")
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [asarray(x) for x in x_leaves]
    check_scanned_unsplit([get_aval(x) for x in x_leaves])
    n = _length_of(x_leaves, length)
    init_leaves, init_tree = tree_flatten(init)
    init_leaves = [asarray(x) for x in init_leaves]
    x_avals = [_unstacked(get_aval(x)) for x in x_leaves]
    n_carry = len(init_leaves)
    ys_box: list = []

    def flat(*leaves):
        carry = tree_unflatten(init_tree, list(leaves[:n_carry]))
        x = tree_unflatten(x_tree, list(leaves[n_carry:]))
        out = f(carry, x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("scan body function must return a pair (carry, y), got "
                            f"{type(out).__name__}.")
        c_leaves, c_tree = tree_flatten(out[0])
        y_leaves, y_tree = tree_flatten(out[1])
        ys_box[:] = [y_tree, c_tree]
        return c_leaves + y_leaves

    widen = [frozenset()] * n_carry  # carries typed as varying over more mesh axes

    def traced(leaves):
        avals = with_varying([get_aval(x) for x in leaves], widen) + x_avals
        return trace_flat(flat, avals, "the scan body f", hoist=True)

    for _ in range(8):
        closed, consts = traced(init_leaves)
        y_tree, c_tree = ys_box
        out_avals = list(closed.out_avals)
        if c_tree != init_tree:
            break
        init_leaves, changed = promote_weak(init_leaves, [get_aval(x) for x in init_leaves],
                                             out_avals[:n_carry])
        widen, grown = widen_varying(widen, closed.in_avals[len(consts):][:n_carry],
                                     out_avals[:n_carry])
        if not (changed or grown):
            break
    check_carry(init_tree, c_tree, [get_aval(x) for x in init_leaves], out_avals[:n_carry],
                "scan", f)
    outs = scan_p.bind(*consts, *init_leaves, *x_leaves, jaxpr=closed, length=n,
                       reverse=bool(reverse), unroll=unroll, num_consts=len(consts),
                       num_carry=n_carry)
    return tree_unflatten(init_tree, outs[:n_carry]), tree_unflatten(y_tree, outs[n_carry:])


def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001
    """``f`` applied to each slice of ``xs`` along its leading axis, the results stacked
    (a ``scan`` with no carry).

    Args:
      f: a function of one slice (a pytree like ``xs`` without its leading axis).
      xs: a pytree of arrays sharing a leading axis.
      batch_size: when given, ``f`` is vmapped over chunks of this many slices, a ``scan``
        runs over the chunks, and a remainder (``len % batch_size`` slices) is one more
        vmapped call, as JAX does: the same values with fewer, wider loop steps. ``0``
        (or a size over the length) is one ``vmap`` of every slice.

    Returns:
      The stacked outputs of ``f``.

    Example:
      >>> lax.map(lambda x: x * 2, jnp.arange(3))
      Array([0, 2, 4], dtype=int32)
    """
    if batch_size is not None:
        return _batched_map(f, xs, batch_size)
    return scan(lambda _, x: ((), f(x)), (), xs)[1]


def _batched_map(f: Callable, xs: Any, batch_size: int) -> Any:
    """``map`` in chunks of ``batch_size``: a scan of ``vmap(f)`` over the whole chunks, then
    ``vmap(f)`` of the remaining slices, the results joined along the leading axis."""
    from plax.lax.shape import concatenate, reshape
    from plax.lax.slicing import slice_in_dim
    from plax.transforms.vmap_api import vmap
    batch_size = operator.index(batch_size)
    if batch_size < 0:
        raise ValueError(f"lax.map: batch_size must be a non-negative integer, got "
                         f"{batch_size}")
    leaves, tree = tree_flatten(xs)
    leaves = [asarray(x) for x in leaves]
    # the leading lengths checked first, as the unbatched map checks them: the chunking
    # below slices every leaf by the first leaf's length
    n = _length_of(leaves, None)
    if n == 0:  # no slices: the unbatched map's empty result (as JAX returns)
        return map(f, xs)
    # batch_size 0 is one batch of every slice (a plain vmap), as in JAX; a batch_size
    # over the length leaves no whole chunk, so the same single vmapped call
    chunks, rest = divmod(n, batch_size) if batch_size else (0, n)
    parts = []
    if chunks:
        whole = [reshape(slice_in_dim(x, 0, chunks * batch_size),
                         (chunks, batch_size) + get_aval(x).shape[1:]) for x in leaves]
        ys = scan(lambda _, x: ((), vmap(f)(x)), (), tree_unflatten(tree, whole))[1]
        y_leaves, y_tree = tree_flatten(ys)
        parts.append([reshape(y, (chunks * batch_size,) + get_aval(y).shape[2:])
                      for y in y_leaves])
    if rest:
        tail = tree_unflatten(tree, [slice_in_dim(x, chunks * batch_size, n) for x in leaves])
        y_leaves, y_tree = tree_flatten(vmap(f)(tail))
        parts.append(y_leaves)
    if len(parts) == 1:
        return tree_unflatten(y_tree, parts[0])
    return tree_unflatten(y_tree, [concatenate([a, b], 0) for a, b in zip(*parts)])


# ------------------------------------------------------------------ JVP

def _is_zero(t) -> bool:
    return type(t) is Zero or get_aval(t).dtype == dtypes.float0


def _jvp_body(closed: ClosedJaxpr, nonzeros: tuple, num_consts: int, num_carry: int,
              linear: bool):
    """The body's JVP: inputs ``(consts, carry, xs, nonzero const tangents, carry tangents,
    nonzero x tangents)``, outputs ``(carry, ys, carry tangents, y tangents)``; every inexact
    carry and y has a tangent."""
    in_avals = closed.in_avals
    n = len(in_avals)
    out_avals = closed.out_avals
    carry_nz = [is_inexact_aval(a) for a in in_avals[num_consts:num_consts + num_carry]]
    in_nz = (list(nonzeros[:num_consts]) + carry_nz
             + list(nonzeros[num_consts + num_carry:]))
    out_nz = [is_inexact_aval(a) for a in out_avals]

    def fun(*args):
        it = iter(args[n:])
        ts = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, in_nz)]
        outs, outs_t = jvp_flat(jaxpr_as_fun(closed), list(args[:n]), ts)
        return list(outs) + [instantiate(t) for t, nz in zip(outs_t, out_nz) if nz]

    t_avals = [tangent_aval(a) for a, nz in zip(in_avals, in_nz) if nz]
    staged = stage_derived(fun, list(in_avals) + t_avals, "JVP of a scan body",
                           LinearizeTrace if linear else None)
    return staged, in_nz, out_nz


def _memo(closed: ClosedJaxpr, key: tuple, make: Callable):
    return memo(closed, ("scan",) + key, make)


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, unroll, num_consts, num_carry):
    nc, ncar = num_consts, num_carry
    nonzeros = tuple(not _is_zero(t) for t in tangents)
    nz_any = [t for t in tangents if not _is_zero(t)]
    linear = any(is_linearize_tracer(t) for t in nz_any)
    body, in_nz, out_nz = _memo(jaxpr, ("jvp", nonzeros, nc, ncar, linear),
                                lambda: _jvp_body(jaxpr, nonzeros, nc, ncar, linear))
    consts, carry, xs = primals[:nc], primals[nc:nc + ncar], primals[nc + ncar:]
    c_t = [t for t, nz in zip(tangents[:nc], in_nz[:nc]) if nz]
    car_t = [instantiate(t) for t, nz in zip(tangents[nc:nc + ncar], in_nz[nc:nc + ncar]) if nz]
    x_t = [t for t, nz in zip(tangents[nc + ncar:], in_nz[nc + ncar:]) if nz]
    out_avals = jaxpr.out_avals
    n_out = len(out_avals)
    car_nz, y_nz = out_nz[:ncar], out_nz[ncar:]
    n_car_t = sum(car_nz)
    if linear:
        return _scan_linearize(body, consts, carry, xs, c_t, car_t, x_t, length, reverse,
                               unroll, nc, ncar, out_avals, out_nz, jaxpr)
    # reorder the JVP body to the scan layout: consts, carry, xs (primal then tangent each)
    n_in = len(jaxpr.in_avals)
    n_ct = len(c_t)

    def reordered(*args):
        cs, cts = args[:nc], args[nc:nc + n_ct]
        rest = args[nc + n_ct:]
        car, cart = rest[:ncar], rest[ncar:ncar + n_car_t]
        rest = rest[ncar + n_car_t:]
        x, xt = rest[:len(xs)], rest[len(xs):]
        outs = jaxpr_as_fun(body)(*cs, *car, *x, *cts, *cart, *xt)
        prim_car, prim_y = outs[:ncar], outs[ncar:n_out]
        tans = outs[n_out:]
        return list(prim_car) + list(tans[:n_car_t]) + list(prim_y) + list(tans[n_car_t:])

    def make():
        ins = body.in_avals
        avals = (ins[:nc] + ins[n_in:n_in + n_ct] + ins[nc:nc + ncar]
                 + ins[n_in + n_ct:n_in + n_ct + n_car_t] + ins[nc + ncar:n_in]
                 + ins[n_in + n_ct + n_car_t:])
        return stage_derived(reordered, avals, "JVP of a scan body")

    scan_body = _memo(body, ("reordered", nc, ncar, n_ct, n_car_t), make)
    outs = scan_p.bind(*consts, *c_t, *carry, *car_t, *xs, *x_t, jaxpr=scan_body,
                       length=length, reverse=reverse, unroll=unroll, num_consts=nc + n_ct,
                       num_carry=ncar + n_car_t)
    car_out, car_t_out = outs[:ncar], outs[ncar:ncar + n_car_t]
    y_out, y_t_out = outs[ncar + n_car_t:ncar + n_car_t + n_out - ncar], \
        outs[ncar + n_car_t + n_out - ncar:]
    return (list(car_out) + list(y_out),
            _with_zeros(car_t_out, car_nz, out_avals[:ncar], None)
            + _with_zeros(y_t_out, y_nz, out_avals[ncar:], length))


def _with_zeros(values, nonzeros, avals, length) -> list:
    it = iter(values)
    out = []
    for nz, a in zip(nonzeros, avals):
        if nz:
            out.append(next(it))
        else:
            t = tangent_aval(a)
            out.append(Zero(t if length is None else _stacked(t, length)))
    return out


def _scan_linearize(body, consts, carry, xs, c_t, car_t, x_t, length, reverse, unroll,
                    nc, ncar, out_avals, out_nz, jaxpr):
    """Reverse mode: a primal scan that also stacks each step's residuals, then a linear
    scan of the tangent part over them (staged for transposition). Residuals that are
    loop-invariant (constants of the body, or its loop-invariant inputs) are passed to the
    linear scan once, as its constants, rather than stacked per step."""
    from plax.core.passes import split_known
    n_in, n_out = len(jaxpr.in_avals), len(out_avals)

    def make():
        split = split_known(body, n_in, n_out)
        # per residual: ("value", v) or ("operand", i) if loop-invariant, else ("stacked", k)
        where, n_st = [], 0
        for w, i in split.residuals:
            if w == "const":
                where.append(("value", i))
            elif w == "in" and i < nc:
                where.append(("operand", i))
            else:
                where.append(("stacked", n_st))
                n_st += 1

        def known_fun(*args):
            outs = jaxpr_as_fun(split.known)(*args)
            prim = [args[i] if w == "in" else outs[i] for w, i in split.primal_outs]
            res = []
            for (w, i), (kind, _) in zip(split.residuals, where):
                if kind == "stacked":
                    res.append(args[i] if w == "in" else prim[i] if w == "primal_out"
                               else outs[i])
            return prim + res

        known = stage_derived(known_fun, jaxpr.in_avals, "primal part of a scan body")
        st_avals = known.out_avals[n_out:]
        inv_avals = [get_aval(v) if kind == "value" else jaxpr.in_avals[v]
                     for kind, v in where if kind != "stacked"]
        n_inv, n_ct, n_car_t = len(inv_avals), len(c_t), len(car_t)

        # linear scan layout: consts = invariant residuals, const tangents; carry = carry
        # tangents; xs = stacked residuals, x tangents
        def lin(*args):
            inv, args = args[:n_inv], args[n_inv:]
            cts, cart = args[:n_ct], args[n_ct:n_ct + n_car_t]
            st, xt = args[n_ct + n_car_t:n_ct + n_car_t + n_st], args[n_ct + n_car_t + n_st:]
            it_inv, it_st = iter(inv), iter(st)
            res = [next(it_st) if kind == "stacked" else next(it_inv) for kind, _ in where]
            return jaxpr_as_fun(split.unknown)(*res, *cts, *cart, *xt)

        t_ins = body.in_avals[n_in:]
        lin_avals = (inv_avals + list(t_ins[:n_ct + n_car_t]) + list(st_avals)
                     + list(t_ins[n_ct + n_car_t:]))
        linear_body = stage_derived(lin, lin_avals, "linear part of a scan body", LinearizeTrace)
        return known, where, linear_body

    known, where, linear_body = _memo(body, ("split", n_in, n_out), make)
    outs = scan_p.bind(*consts, *carry, *xs, jaxpr=known, length=length, reverse=reverse,
                       unroll=unroll, num_consts=nc, num_carry=ncar)
    primal_outs, stacked = outs[:n_out], outs[n_out:]
    inv = [v if kind == "value" else consts[v] for kind, v in where if kind != "stacked"]
    t_outs = scan_p.bind(*inv, *c_t, *car_t, *stacked, *x_t, jaxpr=linear_body, length=length,
                         reverse=reverse, unroll=unroll, num_consts=len(inv) + len(c_t),
                         num_carry=len(car_t))
    car_nz, y_nz = out_nz[:ncar], out_nz[ncar:]
    n_car_t = sum(car_nz)
    return (list(primal_outs),
            _with_zeros(t_outs[:n_car_t], car_nz, out_avals[:ncar], None)
            + _with_zeros(t_outs[n_car_t:], y_nz, out_avals[ncar:], length))


register_rule("jvp", scan_p)(_scan_jvp)


# ------------------------------------------------------------------ transpose

def _scan_transpose(cts, *args, jaxpr, length, reverse, unroll, num_consts, num_carry):
    from plax.transforms.transpose import backward_pass, is_undefined_primal
    nc, ncar = num_consts, num_carry
    undefined = [is_undefined_primal(a) for a in args]
    # a known carry of a linear scan is a zero tangent made concrete: transposed as linear
    car_known = [not u for u in undefined[nc:nc + ncar]]
    c_lin, x_lin = undefined[:nc], undefined[nc + ncar:]
    in_avals = jaxpr.in_avals
    out_avals = jaxpr.out_avals
    c_known_avals = [a for a, u in zip(in_avals[:nc], c_lin) if not u]
    c_lin_avals = [a for a, u in zip(in_avals[:nc], c_lin) if u]
    car_avals = in_avals[nc:nc + ncar]
    x_known_avals = [a for a, u in zip(in_avals[nc + ncar:], x_lin) if not u]
    y_avals = out_avals[ncar:]
    j = jaxpr.jaxpr
    known_vars = ([v for v, u in zip(j.invars[:nc], c_lin) if not u]
                  + [v for v, u in zip(j.invars[nc + ncar:], x_lin) if not u])
    lin_vars = ([v for v, u in zip(j.invars[:nc], c_lin) if u] + list(j.invars[nc:nc + ncar])
                + [v for v, u in zip(j.invars[nc + ncar:], x_lin) if u])
    as_linear = Jaxpr(list(j.constvars) + known_vars, lin_vars, j.outvars, j.eqns)
    n_ck, n_cl, n_xk = len(c_known_avals), len(c_lin_avals), len(x_known_avals)

    # transposed scan layout: consts = known consts; carry = (const ct sums, carry cts);
    # xs = (known xs, y cts)
    def t_body(*a):
        ck = a[:n_ck]
        acc = a[n_ck:n_ck + n_cl]
        ct_car = a[n_ck + n_cl:n_ck + n_cl + ncar]
        xk = a[n_ck + n_cl + ncar:n_ck + n_cl + ncar + n_xk]
        ct_y = a[n_ck + n_cl + ncar + n_xk:]
        cts_in = backward_pass(as_linear, list(jaxpr.consts) + list(ck) + list(xk),
                               list(ct_car) + list(ct_y))
        cts_in = [instantiate(c) for c in cts_in]
        from plax.lax.binary import add_any_p
        new_acc = [add_any_p.bind(s, c) for s, c in zip(acc, cts_in[:n_cl])]
        return new_acc + cts_in[n_cl:n_cl + ncar] + cts_in[n_cl + ncar:]

    ct_aval = [tangent_aval(a) for a in c_lin_avals + list(car_avals)]
    t_avals = (c_known_avals + ct_aval + x_known_avals + [tangent_aval(a) for a in y_avals])
    ct_car_avals = tuple(c.aval if type(c) is Zero else get_aval(c) for c in cts)
    t_closed = _memo(jaxpr, ("transpose", tuple(undefined), ct_car_avals),
                     lambda: stage_derived(t_body, t_avals, "transpose of a scan body"))
    ck = [a for a, u in zip(args[:nc], c_lin) if not u]
    xk = [a for a, u in zip(args[nc + ncar:], x_lin) if not u]
    acc0 = [zeros_like_aval(tangent_aval(a)) for a in c_lin_avals]
    ct_car = [instantiate(c) for c in cts[:ncar]]
    ct_y = [instantiate(c) for c in cts[ncar:]]
    outs = scan_p.bind(*ck, *acc0, *ct_car, *xk, *ct_y, jaxpr=t_closed, length=length,
                       reverse=not reverse, unroll=unroll, num_consts=n_ck,
                       num_carry=n_cl + ncar)
    ct_consts = iter(outs[:n_cl])
    ct_init = outs[n_cl:n_cl + ncar]
    ct_xs = iter(outs[n_cl + ncar:])
    return ([next(ct_consts) if u else None for u in c_lin]
            + [None if k else c for c, k in zip(ct_init, car_known)]
            + [next(ct_xs) if u else None for u in x_lin])


register_rule("transpose", scan_p)(_scan_transpose)


# ------------------------------------------------------------------ batching

def _scan_batch(vals, dims, *, jaxpr, length, reverse, unroll, num_consts, num_carry,
                axis_data):
    from plax.transforms.batching import move_axis_to
    size = axis_data.size
    nc, ncar = num_consts, num_carry
    consts = list(vals[:nc])
    c_dims = list(dims[:nc])
    carry = [move_axis_to(v, d, 0, size) for v, d in zip(vals[nc:nc + ncar], dims[nc:nc + ncar])]
    xs, x_dims = [], []
    for v, d in zip(vals[nc + ncar:], dims[nc + ncar:]):
        if d is None:
            xs.append(v)
            x_dims.append(None)
        else:
            xs.append(move_axis_to(v, d, 1, size))
            x_dims.append(0)
    body_dims = tuple(c_dims + [0] * ncar + x_dims)
    in_avals = ([get_aval(v) for v in consts] + [get_aval(v) for v in carry]
                + [_unstacked(get_aval(v)) for v in xs])
    key = (body_dims, tuple(in_avals), axis_data)
    b_body = _memo(jaxpr, ("batch",) + key, lambda: stage_derived(
        batched_fun(jaxpr, body_dims, axis_data), in_avals, "batched scan body"))
    outs = scan_p.bind(*consts, *carry, *xs, jaxpr=b_body, length=length, reverse=reverse,
                       unroll=unroll, num_consts=nc, num_carry=ncar)
    return outs, [0] * ncar + [1] * (len(outs) - ncar)


_scan_batch.needs_axis_data = True
register_rule("batch", scan_p)(_scan_batch)


def _scan_dce(eqn, used: list):
    """Dead-code elimination (:func:`plax.core.passes.dce`): the stacked outputs nobody
    reads are not computed (the body pruned to the carries and the used ``ys``); the
    carries stay, since the next step may read them."""
    from plax.core.jaxpr import JaxprEqn
    from plax.core.passes import pruned_outputs
    n_carry = eqn.params["num_carry"]
    keep = tuple([True] * n_carry + [bool(u) for u in used[n_carry:]])
    if all(keep):
        return eqn
    body = pruned_outputs(eqn.params["jaxpr"], keep)
    return JaxprEqn(eqn.primitive, list(eqn.invars),
                    [v for v, k in zip(eqn.outvars, keep) if k], dict(eqn.params, jaxpr=body))


register_rule("dce", scan_p)(_scan_dce)

__all__ = ["scan", "map", "scan_p"]

"""The ``checkify`` rules of plax's primitives: division, indexing and control flow.

Primitives in :data:`~plax_checkify.transform.NAN_PRIMITIVES` without a rule of their own
get the NaN check; the rest are bound unchanged.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core import register_rule
from plax.core.trace import get_aval
from plax.lax import binary, control_flow, slicing
from plax.transforms.call import jit_p

from plax_checkify.errors import DivisionByZeroError, OOBError
from plax_checkify.transform import ErrorState, nan_check_rule


def _jnp():
    from plax import numpy as jnp
    return jnp


# ------------------------------------------------------------------ division

@register_rule("checkify", binary.div_p)
def _div_rule(ctx: ErrorState, x, y):
    if DivisionByZeroError in ctx.enabled:
        jnp = _jnp()
        ctx.report(DivisionByZeroError, jnp.any(jnp.equal(y, 0)))
    return nan_check_rule(binary.div_p, ctx, x, y)


# ------------------------------------------------------------------ indexing

def _oob_payload(mask, indices, dims_map, operand_shape):
    """``[index, axis, axis size]`` of the first out-of-bounds index (int32), where ``mask``
    and ``indices`` end in an axis of one index per dimension of ``dims_map``."""
    jnp = _jnp()
    first = jnp.argmax(jnp.ravel(mask))
    axis = jnp.asarray(np.asarray(dims_map, np.int32))[first % len(dims_map)]
    size = jnp.asarray(np.asarray(operand_shape, np.int32))[axis]
    index = jnp.ravel(indices)[first].astype(np.int32)
    return jnp.stack([index, axis, size])


def _report_oob(ctx, indices, upper, dims_map, operand_shape):
    """Reports an OOBError where an index (last axis of ``indices``) is below 0 or above
    ``upper`` (the largest valid start of each indexed dimension)."""
    if OOBError not in ctx.enabled or not dims_map or get_aval(indices).size == 0:
        return
    jnp = _jnp()
    dt = get_aval(indices).dtype
    mask = (indices < 0) | (indices > jnp.asarray(np.asarray(upper, dt)))
    ctx.report(OOBError, jnp.any(mask), [_oob_payload(mask, indices, dims_map, operand_shape)],
               info=tuple(operand_shape))


@register_rule("checkify", slicing.gather_p)
def _gather_rule(ctx, operand, indices, **params):
    out = slicing.gather_p.bind(operand, indices, **params)
    shape = get_aval(operand).shape
    dims = tuple(params["dimension_numbers"].start_index_map)
    sizes = params["slice_sizes"]
    _report_oob(ctx, indices, [shape[d] - sizes[d] for d in dims], dims, shape)
    return out


def _scatter_rule(prim):
    def rule(ctx, operand, indices, updates, **params):
        out = prim.bind(operand, indices, updates, **params)
        dn = params["dimension_numbers"]
        shape = get_aval(operand).shape
        window, pos = [], 0
        for d in range(len(shape)):
            if d in dn.inserted_window_dims or d in dn.operand_batching_dims:
                window.append(1)
            else:
                window.append(get_aval(updates).shape[dn.update_window_dims[pos]])
                pos += 1
        dims = tuple(dn.scatter_dims_to_operand_dims)
        _report_oob(ctx, indices, [shape[d] - window[d] for d in dims], dims, shape)
        return out

    return rule


for _p in (slicing.scatter_p, slicing.scatter_add_p, slicing.scatter_mul_p,
           slicing.scatter_min_p, slicing.scatter_max_p):
    register_rule("checkify", _p)(_scatter_rule(_p))


def _report_start_oob(ctx, starts, window, shape):
    if not starts or OOBError not in ctx.enabled:
        return
    jnp = _jnp()
    starts = jnp.stack([jnp.asarray(s) for s in starts])
    _report_oob(ctx, starts, [n - w for n, w in zip(shape, window)], tuple(range(len(shape))),
                shape)


@register_rule("checkify", slicing.dynamic_slice_p)
def _dynamic_slice_rule(ctx, operand, *starts, **params):
    out = slicing.dynamic_slice_p.bind(operand, *starts, **params)
    _report_start_oob(ctx, starts, params["slice_sizes"], get_aval(operand).shape)
    return out


@register_rule("checkify", slicing.dynamic_update_slice_p)
def _dynamic_update_slice_rule(ctx, operand, update, *starts, **params):
    out = slicing.dynamic_update_slice_p.bind(operand, update, *starts, **params)
    _report_start_oob(ctx, starts, get_aval(update).shape, get_aval(operand).shape)
    return out


# ------------------------------------------------------------------ calls and control flow

@register_rule("checkify", jit_p)
def _jit_rule(ctx, *args, jaxpr, name, **_placement):
    # inlined: the caller is being traced or run anyway, and the error value needs no call
    # (so a jit(f, device=..., backend=...) runs where its caller runs)
    return ctx.interpret(jaxpr, args)


@register_rule("checkify", control_flow.cond_p)
def _cond_rule(ctx, index, *ops, branches):
    def branch_fn(closed):
        def run(leaves, xs):
            st = ctx.child(leaves)
            outs = st.interpret(closed, xs)
            return st.leaves(), outs
        return run

    for b in branches:
        ctx.discover(lambda st, *xs, b=b: st.interpret(b, xs), *b.in_avals)
    leaves, outs = lax.switch(index, [branch_fn(b) for b in branches], ctx.leaves(), list(ops))
    ctx.load(leaves)
    return outs


@register_rule("checkify", control_flow.scan_p)
def _scan_rule(ctx, *args, jaxpr, length, reverse, unroll, num_consts, num_carry):
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])

    def step(st, carry, x):
        outs = st.interpret(jaxpr, consts + list(carry) + list(x))
        return outs[:num_carry], outs[num_carry:]

    x_avals = jaxpr.in_avals[num_consts + num_carry:]
    ctx.discover(lambda st, *cx: step(st, cx[:num_carry], cx[num_carry:]),
                 *[get_aval(c) for c in carry], *x_avals)

    def body(c, x):
        leaves, carry = c
        st = ctx.child(leaves)
        new_carry, ys = step(st, carry, x)
        return (st.leaves(), new_carry), ys

    (leaves, carry), ys = lax.scan(body, (ctx.leaves(), carry), xs, length=length,
                                   reverse=reverse, unroll=unroll)
    ctx.load(leaves)
    return list(carry) + list(ys)


@register_rule("checkify", control_flow.while_p)
def _while_rule(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts = list(args[:cond_nconsts])
    bconsts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])

    def step(st, carry):
        carry = st.interpret(body_jaxpr, bconsts + list(carry))
        st.interpret(cond_jaxpr, cconsts + list(carry))  # the checks of the next test
        return carry

    ctx.interpret(cond_jaxpr, cconsts + carry)  # the checks of the first test
    ctx.discover(lambda st, *c: step(st, c), *[get_aval(c) for c in carry])

    def cond_fun(c):
        leaves, carry = c
        return ctx.child(leaves).interpret(cond_jaxpr, cconsts + list(carry))[0]

    def body_fun(c):
        leaves, carry = c
        st = ctx.child(leaves)
        carry = step(st, carry)
        return st.leaves(), carry

    leaves, carry = lax.while_loop(cond_fun, body_fun, (ctx.leaves(), carry))
    ctx.load(leaves)
    return list(carry)

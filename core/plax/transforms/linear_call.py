"""``linear_call``: a call of a linear function whose transpose the user supplies.

A call binds the ``linear_call`` primitive with JAX 0.10's parameters: ``callee``, the
function as a closed jaxpr, and ``transpose_thunk``, which returns its transpose (a closed
jaxpr) and the values that transpose closed over. Its transpose rule is another
``linear_call`` with the two swapped, so transposing twice gives the function back.

The primitive is not a call primitive (its body is not pruned by the cleanup pass that
drops unused equations inside ``jit`` bodies, nor spliced before transposition): pruning
the function's body would leave its transpose describing a different function. Only when a
backend compiles a program is ``callee`` inlined, as the bodies of ``custom_jvp_call`` and
``custom_vjp_call`` are (:func:`plax.core.passes.inline_calls` reads the primitive's
``inline_param``).

Operands are ``[*callee_consts, *residuals, *linear]``, ``num_callee_consts`` and
``num_res`` long: the values the function closed over come first (its jaxpr takes them as
leading inputs and holds no constants), as JAX prints them, then the tracers the transpose
closed over (which JAX leaves in its thunk; here both jaxprs take all of these leading
operands, each ignoring the other's, so the transposed equation keeps the layout).
"""
from __future__ import annotations

from typing import Any, Callable

from plax import tree_util
from plax.core.interpret import jaxpr_as_fun
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.trace import get_aval, state as trace_state
from plax.transforms.jvp import Zero, zeros_like_aval

class _LinearCallPrimitive(Primitive):
    """``linear_call``: its ``callee`` is inlined where a backend compiles the program."""

    __slots__ = ()
    inline_param = "callee"
    # JAX prints the thunk as a function's repr, with the address masked
    pp_params = {"transpose_thunk":
                 lambda _: "<function _memoize.<locals>.memoized at 0xXXXXXXXXXXXX>"}


linear_call_p = _LinearCallPrimitive("linear_call", multiple_results=True)
linear_call_p.def_abstract_eval(lambda *avals, callee, **_: list(callee.out_avals))


class TransposeThunk:
    """``linear_call``'s ``transpose_thunk`` parameter: called, it returns the transpose, a
    closed jaxpr taking the equation's leading ``num_callee_consts`` operands (the values
    either function closed over), then the residuals, then the output cotangents."""

    __slots__ = ("transpose",)

    def __init__(self, transpose: ClosedJaxpr):
        self.transpose = transpose

    def __call__(self) -> ClosedJaxpr:
        return self.transpose

    def __repr__(self) -> str:
        return f"TransposeThunk({self.transpose})"


def linear_call(fun: Callable, fun_transpose: Callable, residual_args: Any,
                linear_args: Any) -> Any:
    """Calls a function linear in ``linear_args`` whose transpose is ``fun_transpose``
    (JAX's ``jax.custom_derivatives.linear_call``).

    ``fun(residual_args, linear_args)`` is linear in ``linear_args``; ``fun_transpose(
    residual_args, out_cotangent)`` is its transpose with respect to them. Reverse mode
    (``grad``, ``vjp``, ``linear_transpose``) transposes the call to a call of
    ``fun_transpose`` (whose own transpose is ``fun``); ``jvp`` applies ``fun`` to the
    tangents of ``linear_args``; ``jit`` stages it and ``vmap`` batches both functions.

    Args:
      fun: ``fun(residual_args, linear_args) -> out``, linear in ``linear_args``.
      fun_transpose: ``fun_transpose(residual_args, out_ct) -> linear_args_ct``, with
        ``linear_args``'s pytree structure.
      residual_args: a pytree of arrays ``fun`` is not (necessarily) linear in; they are
        not differentiated.
      linear_args: a pytree of arrays ``fun`` is linear in.

    Returns:
      ``fun(residual_args, linear_args)``.

    Raises:
      TypeError: ``fun_transpose``'s output structure differs from ``linear_args``'s, or
        ``residual_args`` are being differentiated (the transpose says nothing about them).

    Example:
      >>> from plax.custom_derivatives import linear_call
      >>> def div_add(x, denom):
      ...     return x + linear_call(lambda r, x: x / r, lambda r, t: t / r, denom, x)
      >>> jax.grad(div_add)(9.0, 3.0)
      Array(1.3333334, dtype=float32, weak_type=True)
    """
    if trace_state.depth == 0:  # no transform: the call is just the function
        return fun(residual_args, linear_args)
    from plax.transforms.autodiff import _as_array
    res_leaves, res_tree = tree_util.tree_flatten(residual_args)
    lin_leaves, lin_tree = tree_util.tree_flatten(linear_args)
    res_leaves = [_as_array(x) for x in res_leaves]
    lin_leaves = [_as_array(x) for x in lin_leaves]
    nr = len(res_leaves)
    out_trees: list = []

    def flat_fun(*xs):
        out = fun(tree_util.tree_unflatten(res_tree, xs[:nr]),
                  tree_util.tree_unflatten(lin_tree, xs[nr:]))
        leaves, tree = tree_util.tree_flatten(out)
        out_trees.append(tree)
        return [_as_array(o) for o in leaves]

    res_avals = [get_aval(x) for x in res_leaves]
    # as JAX: every value the function closed over is a leading operand of the equation
    callee, c_consts = _trace(flat_fun, res_avals + [get_aval(x) for x in lin_leaves],
                              "the function given to linear_call", move_all=True)
    out_tree = out_trees[-1]

    def flat_transpose(*xs):
        ct = fun_transpose(tree_util.tree_unflatten(res_tree, xs[:nr]),
                           tree_util.tree_unflatten(out_tree, xs[nr:]))
        leaves, tree = tree_util.tree_flatten(ct)
        if tree != lin_tree:
            raise TypeError(f"transpose output pytree structure must match that of linear "
                            f"inputs, got output structure {tree} and input structure "
                            f"{lin_tree}.")
        return [_as_array(o) for o in leaves]

    # the transpose keeps the arrays it closed over; the tracers it closed over are operands
    # too (they belong to a trace that may be gone when the equation is transposed)
    transpose, t_consts = _trace(flat_transpose, res_avals + list(callee.out_avals),
                                 "the transpose function given to linear_call")
    callee = _with_unused_consts(callee, len(c_consts), t_consts, after=True)
    transpose = _with_unused_consts(transpose, len(t_consts), c_consts, after=False)
    outs = linear_call_p.bind(*c_consts, *t_consts, *res_leaves, *lin_leaves, callee=callee,
                              transpose_thunk=TransposeThunk(transpose),
                              num_callee_consts=len(c_consts) + len(t_consts), num_res=nr)
    return tree_util.tree_unflatten(out_tree, outs)


def _trace(fun, avals, where, move_all: bool = False) -> tuple[ClosedJaxpr, list]:
    """``fun`` as a closed jaxpr whose leading invars are the traced values it closed over
    (with ``move_all``, the arrays too: then it holds no constants), and those values."""
    from plax.transforms.staging import convert_tracer_consts, trace_to_jaxpr
    closed, _ = trace_to_jaxpr(fun, avals, where)
    j = closed.jaxpr
    if move_all:
        return (ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns),
                            []), list(closed.consts))
    return convert_tracer_consts(j, closed.consts)


def _with_unused_consts(closed: ClosedJaxpr, n_own: int, others: list, after: bool
                        ) -> ClosedJaxpr:
    """``closed`` taking the other function's captured values too (unused), before or after
    its own leading ones, so both jaxprs take ``[*callee_consts, *transpose_consts, ...]``."""
    if not others:
        return closed
    j = closed.jaxpr
    extra = [Var(get_aval(c)) for c in others]
    own, rest = list(j.invars[:n_own]), list(j.invars[n_own:])
    invars = own + extra + rest if after else extra + own + rest
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.outvars, j.eqns), closed.consts)


@register_rule("impl", linear_call_p)
def _linear_call_impl(*args, callee, **_):
    return jaxpr_as_fun(callee)(*args)


@register_rule("jvp", linear_call_p)
def _linear_call_jvp(primals, tangents, *, num_callee_consts, num_res, **params):
    n = num_callee_consts + num_res
    if any(type(t) is not Zero for t in tangents[:n]):
        raise TypeError("linear_call: a residual argument (or a value the function closes "
                        "over) is being differentiated, but the function is only linear in "
                        "its linear arguments and its transpose says nothing about the "
                        "residuals. Pass differentiated values as linear_args, or apply "
                        "lax.stop_gradient to the residuals.")
    params = dict(params, num_callee_consts=num_callee_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    lin_tangents = [zeros_like_aval(t.aval) if type(t) is Zero else t for t in tangents[n:]]
    t_outs = linear_call_p.bind(*primals[:n], *lin_tangents, **params)
    return outs, t_outs


@register_rule("transpose", linear_call_p)
def _linear_call_transpose(cts, *args, callee, transpose_thunk, num_callee_consts, num_res):
    from plax.transforms.transpose import is_undefined_primal
    n = num_callee_consts + num_res
    if any(is_undefined_primal(x) for x in args[:n]):
        raise TypeError("linear_call is linear only in its linear arguments: it cannot be "
                        "transposed with respect to a residual argument.")
    transpose = transpose_thunk()
    ct_avals = transpose.in_avals[n:]
    cts = [zeros_like_aval(a) if type(c) is Zero else c for c, a in zip(cts, ct_avals)]
    cts_in = linear_call_p.bind(*args[:n], *cts, callee=transpose,
                                transpose_thunk=TransposeThunk(callee),
                                num_callee_consts=num_callee_consts, num_res=num_res)
    return [None] * n + list(cts_in)


def _linear_call_batch(vals, dims, *, callee, transpose_thunk, num_callee_consts, num_res,
                       axis_data):
    # Every linear input, output and cotangent is batched on axis 0, so the batched
    # transpose maps the batched function's output cotangents to its inputs' exactly.
    from plax.transforms.batching import batch_flat_fun, move_axis_to
    from plax.transforms.call import _batched_aval
    n, size = num_callee_consts + num_res, axis_data.size
    vals = list(vals[:n]) + [move_axis_to(v, d, 0, size) for v, d in zip(vals[n:], dims[n:])]
    dims = list(dims[:n]) + [0] * (len(vals) - n)
    fixed = [a if d is None else _batched_aval(a, d, size)
             for d, a in zip(dims[:n], callee.in_avals[:n])]
    n_out = len(callee.out_avals)

    def batched(closed, ins):
        fun = batch_flat_fun(jaxpr_as_fun(closed), dims[:n] + [0] * ins, axis_data)
        in_avals = fixed + [_batched_aval(a, 0, size) for a in closed.in_avals[n:]]
        staged, consts = _trace(fun, in_avals, "a batched linear_call")
        assert not consts  # the values closed over are operands already
        return staged

    callee_b = batched(callee, len(vals) - n)
    transpose_b = batched(transpose_thunk(), n_out)
    outs = linear_call_p.bind(*vals, callee=callee_b, transpose_thunk=TransposeThunk(transpose_b),
                              num_callee_consts=num_callee_consts, num_res=num_res)
    return outs, [0] * len(outs)


_linear_call_batch.needs_axis_data = True
register_rule("batch", linear_call_p)(_linear_call_batch)

__all__ = ["linear_call", "linear_call_p"]

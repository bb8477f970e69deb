"""``cond`` and ``switch``: the ``cond`` primitive, an index choosing one of several branches.

The primitive takes an int32 index, then the values the branches closed over, then the
operands; ``branches`` is a tuple of ClosedJaxprs of identical signature. Rules:

* JVP: a ``cond`` of the branches' JVPs. In reverse mode each branch's JVP is split into
  its primal part (which also returns the residuals the tangent part needs; every branch
  returns every branch's residual slots, zeros for the others') and its linear tangent part,
  so the primal ``cond`` runs now and a linear ``cond`` of the tangent parts is staged.
* transpose: a ``cond`` of the transposed branches.
* batching: an unbatched index gives a ``cond`` of the batched branches; a batched index
  runs every branch on the whole batch and picks per member with ``select_n``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plax import dtypes
from plax.core.interpret import jaxpr_as_fun
from plax.core import varying
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.trace import get_aval
from plax.lax.base import asarray
from plax.lax.control_flow.common import (batched_fun, is_inexact_aval, join_weak, long_str,
                                          memo, merge_captured, same_type, stage_derived,
                                          trace_flat, type_mismatch, with_leading_inputs)
from plax.pytrees.engine import tree_flatten, tree_unflatten
from plax.lowering.bodies import register_body_kernel, run_cond
from plax.transforms.batching import register_program_primitive
from plax.transforms.jvp import Zero, instantiate, jvp_flat, tangent_aval, zeros_like_aval
from plax.transforms.staging import LinearizeTrace, is_linearize_tracer

cond_p = Primitive("cond", multiple_results=True)


# ------------------------------------------------------------------ abstract eval

def _cond_abstract_eval(index, *ops, branches):
    if index.shape != () or index.dtype != np.dtype(np.int32):
        raise TypeError(f"cond index must be an int32 scalar, got {index.str_short()}")
    if not branches:
        raise TypeError("cond requires at least one branch")
    want = branches[0].in_avals
    if len(ops) != len(want) or any(not same_type(a, w) for a, w in zip(ops, want)):
        raise TypeError(f"cond branches take operands of types "
                        f"{[w.str_short() for w in want]}, got {[a.str_short() for a in ops]}")
    outs = [b.out_avals for b in branches]
    for i, o in enumerate(outs[1:], 1):
        if len(o) != len(outs[0]) or any(not same_type(a, b) for a, b in zip(o, outs[0])):
            raise TypeError(f"cond branches 0 and {i} have different output types: "
                            f"{[a.str_short() for a in outs[0]]} and "
                            f"{[a.str_short() for a in o]}")
    joined = [join_weak(col) for col in zip(*outs)]
    if index.vma:  # shard_map typing: which branch runs differs between devices
        joined = [a.update(vma=a.vma | index.vma) for a in joined]
    return joined


cond_p.def_abstract_eval(_cond_abstract_eval)
varying.register_self_typed(cond_p)  # results typed by the traced branches
register_program_primitive(cond_p)
# its bodies run with the backend and on the device of the program holding it
register_body_kernel(cond_p, run_cond)


# ------------------------------------------------------------------ user functions

def _fun_name(f: Callable) -> str:
    code = getattr(f, "__code__", None)
    name = getattr(f, "__name__", repr(f))
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name


def _trace_branches(funs: Sequence[Callable], ops: list, what: str):
    """Each branch traced on the operands: ``(branches, captured, out_tree)``, every branch
    taking all the captured values first, then the flat operands.

    ``cond`` (whose ``funs`` are ``[false_fun, true_fun]``) traces ``true_fun`` first, as
    JAX does: what the branches print while traced, and the order of the captured values
    (the jaxpr's constvars), follow JAX's."""
    leaves, in_tree = tree_flatten(ops)
    leaves = [asarray(x) for x in leaves]
    avals = [get_aval(x) for x in leaves]
    order = [1, 0] if what == "cond" else list(range(len(funs)))
    closed_list, captured_list, trees, out_avals = [], [], [], []
    for f in (funs[i] for i in order):
        out_tree_box = []

        def flat(*xs, f=f, box=out_tree_box):
            out = f(*tree_unflatten(in_tree, list(xs)))
            out_leaves, out_tree = tree_flatten(out)
            box.append(out_tree)
            return out_leaves

        closed, captured = trace_flat(flat, avals, f"the {what} branch {_fun_name(f)}",
                                      hoist=True)
        closed_list.append(closed)
        captured_list.append(captured)
        trees.append(out_tree_box[0])
        out_avals.append(closed.out_avals)
    merged, positions = merge_captured(captured_list)
    cap_avals = [get_aval(c) for c in merged]
    branches = [with_leading_inputs(c, p, cap_avals) for c, p in zip(closed_list, positions)]
    back = [order.index(i) for i in range(len(funs))]  # from tracing order to branch order
    return (tuple(branches[j] for j in back), merged, leaves, [trees[j] for j in back],
            [out_avals[j] for j in back])


def _check_outputs(funs, trees, out_avals, what: str) -> None:
    two = len(funs) == 2 and what == "cond"
    names = ["false_fun", "true_fun"] if two else [f"branch {i}" for i in range(len(funs))]
    ref = 1 if two else 0  # cond reports true_fun first, as JAX does
    for i in range(len(funs)):
        if i == ref:
            continue
        a, b = (ref, i)
        if trees[a] != trees[b]:
            raise TypeError(
                f"{what} branches must have equal output types but they differ.\n\n"
                f"{names[a]} output must have same type structure as {names[b]} output, "
                f"got {trees[a]} and {trees[b]}.")
        for x, y in zip(out_avals[a], out_avals[b]):
            if not same_type(x, y):
                raise TypeError(
                    f"{what} branches must have equal output types but they differ.\n\n"
                    f"{names[a]} is {_fun_name(funs[a])}\n{names[b]} is {_fun_name(funs[b])}"
                    f"\n\nThe output of {names[a]} has type {long_str(x)} but the "
                    f"corresponding output of {names[b]} has type {long_str(y)}, "
                    f"{type_mismatch(x, y)}.\n\nRevise {names[a]} and/or {names[b]} so that "
                    "all output types match.")


def _bind_branches(index, funs: Sequence[Callable], ops: list, what: str):
    branches, captured, leaves, trees, out_avals = _trace_branches(funs, ops, what)
    _check_outputs(funs, trees, out_avals, what)
    outs = cond_p.bind(index, *captured, *leaves, branches=branches)
    return tree_unflatten(trees[0], outs)


_NO_OPERAND = object()  # the default of ``operand=``: distinct from an operand None


def _keyword_operand(operand, operands: tuple) -> tuple:
    """``operands`` with JAX's older ``operand=`` keyword (one pytree) folded in; both at
    once is JAX's TypeError."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand} and positional operands {operands}")
    return (operand,)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands: Any,
         operand: Any = _NO_OPERAND) -> Any:
    """Calls ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one
    ``cond`` primitive (only the chosen branch runs; under ``vmap`` with a batched
    ``pred`` both run and the results are selected).

    Args:
      pred: a scalar boolean (or number: nonzero is true).
      true_fun, false_fun: functions of ``*operands`` returning pytrees of the same
        structure and types.
      *operands: the pytrees passed to the branch functions.
      operand: JAX's older keyword form of a single operand (not with ``*operands``).

    Returns:
      The chosen branch's output.

    Example:
      >>> x = jnp.float32(3.0)
      >>> lax.cond(x > 0, lambda x: x * 2, lambda x: -x, x)
      Array(6., dtype=float32)
    """
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _keyword_operand(operand, operands)
    pred = asarray(pred)
    aval = get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {aval.shape}.")
    if aval.dtype != np.dtype(bool):
        if not (dtypes.is_inexact(aval.dtype) or np.issubdtype(aval.dtype, np.integer)):
            raise TypeError(f"Pred type must be either boolean or number, got {aval.dtype}.")
        from plax.lax.binary import ne
        from plax.lax.shape import full_like
        pred = ne(pred, full_like(pred, 0))
    from plax.lax.convert import convert_element_type
    index = convert_element_type(pred, np.int32)
    return _bind_branches(index, [false_fun, true_fun], list(operands), "cond")


def switch(index, branches: Sequence[Callable], *operands: Any,
           operand: Any = _NO_OPERAND) -> Any:
    """Calls ``branches[index](*operands)``, the index clamped to ``[0, len(branches) - 1]``.

    Args:
      index: a scalar integer.
      branches: a non-empty sequence of functions returning the same types.
      *operands: the pytrees passed to the branch.
      operand: JAX's older keyword form of a single operand (not with ``*operands``).

    Returns:
      The chosen branch's output.

    Example:
      >>> lax.switch(1, [jnp.sin, jnp.cos, jnp.tan], 0.0)
      Array(1., dtype=float32, weak_type=True)
    """
    operands = _keyword_operand(operand, operands)
    branches = list(branches) if not callable(branches) else branches
    if callable(branches) or len(branches) == 0:
        raise ValueError("Empty branch sequence" if not callable(branches)
                         else "branches argument should be a sequence of callables.")
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    index = asarray(index)
    aval = get_aval(index)
    if aval.shape != ():
        raise TypeError(f"Branch index must be scalar, got {index} of shape {aval.shape}.")
    if not np.issubdtype(aval.dtype, np.integer):
        raise TypeError(f"Index type must be an integer, got {index} of type {aval.dtype}.")
    from plax.lax.convert import convert_element_type
    from plax.lax.select import clamp
    index = convert_element_type(index, np.int32)
    if len(branches) == 1:
        return branches[0](*operands)
    index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    return _bind_branches(index, branches, list(operands), "switch")


# ------------------------------------------------------------------ derived branches

def _memo(branches: tuple, key: tuple, make: Callable):
    return memo(branches[0], ("cond",) + tuple(branches[1:]) + key, make)


def _is_zero(t) -> bool:
    return type(t) is Zero or get_aval(t).dtype == dtypes.float0


def _jvp_branch(closed: ClosedJaxpr, nonzeros: tuple, t_avals: tuple, out_nz: tuple,
                linear: bool) -> ClosedJaxpr:
    in_avals = closed.in_avals
    n = len(in_avals)

    def fun(*args):
        it = iter(args[n:])
        tangents = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs_p, outs_t = jvp_flat(jaxpr_as_fun(closed), list(args[:n]), tangents)
        return list(outs_p) + [instantiate(t) for t, nz in zip(outs_t, out_nz) if nz]

    return stage_derived(fun, list(in_avals) + list(t_avals), "JVP of a cond branch",
                         LinearizeTrace if linear else None)


def _split_branches(branches, nonzeros, t_avals, out_nz):
    """Per branch, its JVP split into a primal part (operands -> outputs, then every
    branch's residual slots) and a linear part (all residuals, tangents -> tangents)."""
    from plax.core.passes import split_known
    n_in, n_out = len(branches[0].in_avals), len(branches[0].out_avals)
    knowns, unknowns, res_avals = [], [], []
    for b in branches:
        jvp_closed = _jvp_branch(b, nonzeros, t_avals, out_nz, linear=True)
        split = split_known(jvp_closed, n_in, n_out)

        def known_fun(*ops, split=split):
            outs = jaxpr_as_fun(split.known)(*ops)
            prim = [ops[i] if w == "in" else outs[i] for w, i in split.primal_outs]
            res = []
            for w, i in split.residuals:
                res.append(i if w == "const" else ops[i] if w == "in"
                           else prim[i] if w == "primal_out" else outs[i])
            return prim + res

        known = stage_derived(known_fun, b.in_avals, "primal part of a cond branch")
        knowns.append(known)
        unknowns.append(split.unknown)
        res_avals.append(known.out_avals[n_out:])
    all_res = [a for r in res_avals for a in r]
    starts = np.cumsum([0] + [len(r) for r in res_avals])
    known_branches, linear_branches = [], []
    for k, (known, unknown) in enumerate(zip(knowns, unknowns)):
        lo, hi = int(starts[k]), int(starts[k + 1])

        def padded(*ops, known=known, lo=lo, hi=hi):
            outs = jaxpr_as_fun(known)(*ops)
            zeros = [zeros_like_aval(a) for a in all_res]
            return list(outs[:n_out]) + zeros[:lo] + list(outs[n_out:]) + zeros[hi:]

        def lin(*args, unknown=unknown, lo=lo, hi=hi):
            return jaxpr_as_fun(unknown)(*args[lo:hi], *args[len(all_res):])

        known_branches.append(stage_derived(padded, branches[0].in_avals,
                                            "primal part of a cond branch"))
        linear_branches.append(stage_derived(lin, list(all_res) + list(t_avals),
                                             "linear part of a cond branch", LinearizeTrace))
    return tuple(known_branches), tuple(linear_branches)


def _with_zeros(values, nonzeros, avals) -> list:
    it = iter(values)
    return [next(it) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzeros, avals)]


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    nonzeros = tuple(not _is_zero(t) for t in tangents[1:])
    nz_t = [t for t, nz in zip(tangents[1:], nonzeros) if nz]
    t_avals = tuple(get_aval(t) for t in nz_t)
    out_avals = branches[0].out_avals
    out_nz = tuple(is_inexact_aval(a) for a in out_avals)
    n = len(out_avals)
    if any(is_linearize_tracer(t) for t in nz_t):
        known, linear = _memo(branches, ("lin", nonzeros, t_avals),
                              lambda: _split_branches(branches, nonzeros, t_avals, out_nz))
        outs = cond_p.bind(index, *ops, branches=known)
        t_outs = cond_p.bind(index, *outs[n:], *nz_t, branches=linear)
        return outs[:n], _with_zeros(t_outs, out_nz, out_avals)
    jvp_branches = _memo(branches, ("jvp", nonzeros, t_avals), lambda: tuple(
        _jvp_branch(b, nonzeros, t_avals, out_nz, linear=False) for b in branches))
    outs = cond_p.bind(index, *ops, *nz_t, branches=jvp_branches)
    return outs[:n], _with_zeros(outs[n:], out_nz, out_avals)


register_rule("jvp", cond_p)(_cond_jvp)


# ------------------------------------------------------------------ transpose

def _transpose_branch(closed: ClosedJaxpr, undefined: tuple, ct_avals: tuple) -> ClosedJaxpr:
    from plax.transforms.transpose import backward_pass
    j = closed.jaxpr
    known = [v for v, u in zip(j.invars, undefined) if not u]
    lin = [v for v, u in zip(j.invars, undefined) if u]
    as_linear = Jaxpr(list(j.constvars) + known, lin, j.outvars, j.eqns)
    n_known = len(known)

    def fun(*args):
        it = iter(args[n_known:])
        cts = [Zero(tangent_aval(v.aval)) if a is None else next(it)
               for v, a in zip(j.outvars, ct_avals)]
        cts_in = backward_pass(as_linear, list(closed.consts) + list(args[:n_known]), cts)
        return [instantiate(c) if type(c) is Zero else c for c in cts_in]

    in_avals = [v.aval for v in known] + [a for a in ct_avals if a is not None]
    return stage_derived(fun, in_avals, "transpose of a cond branch")


def _cond_transpose(cts, index, *args, branches):
    from plax.transforms.transpose import is_undefined_primal
    undefined = tuple(is_undefined_primal(x) for x in args)
    ct_avals = tuple(None if _is_zero(c) else get_aval(c) for c in cts)
    t_branches = _memo(branches, ("transpose", undefined, ct_avals), lambda: tuple(
        _transpose_branch(b, undefined, ct_avals) for b in branches))
    operands = [x for x, u in zip(args, undefined) if not u]
    operands += [c for c, a in zip(cts, ct_avals) if a is not None]
    outs = iter(cond_p.bind(index, *operands, branches=t_branches))
    return [None] + [next(outs) if u else None for u in undefined]


register_rule("transpose", cond_p)(_cond_transpose)


# ------------------------------------------------------------------ batching

def _cond_batch(vals, dims, *, branches, axis_data):
    from plax.lax.select import clamp, select_n
    from plax.lax.shape import broadcast_in_dim
    from plax.transforms.batching import move_axis_to
    index, idim = vals[0], dims[0]
    ops, op_dims = list(vals[1:]), tuple(dims[1:])
    size = axis_data.size
    if idim is None:
        def make():
            in_avals = [varying.outside(a, axis_data.name) if d is None else get_aval(v)
                        for a, v, d in zip(branches[0].in_avals, ops, op_dims)]
            return tuple(stage_derived(batched_fun(b, op_dims, axis_data), in_avals,
                                       "batched cond branch") for b in branches)
        key_avals = tuple(None if d is None else get_aval(v) for v, d in zip(ops, op_dims))
        b_branches = _memo(branches, ("batch", op_dims, key_avals, axis_data), make)
        outs = cond_p.bind(index, *ops, branches=b_branches)
        return outs, [0] * len(outs)
    # A batched index: every branch runs on the whole batch; select per member.
    index = move_axis_to(index, idim, 0, size)
    index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    per_branch = [batched_fun(b, op_dims, axis_data)(*ops) for b in branches]
    outs = []
    for k, out_aval in enumerate(branches[0].out_avals):
        cases = [p[k] for p in per_branch]
        shape = (size,) + tuple(out_aval.shape)
        which = broadcast_in_dim(index, shape, (0,))
        if len(cases) == 2:
            from plax.lax.convert import convert_element_type
            which = convert_element_type(which, np.bool_)
        outs.append(select_n(which, *cases))
    return outs, [0] * len(outs)


_cond_batch.needs_axis_data = True
register_rule("batch", cond_p)(_cond_batch)

__all__ = ["cond", "switch", "cond_p"]

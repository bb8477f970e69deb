"""``custom_jvp`` and ``custom_vjp``: functions with user-supplied derivative rules.

A call binds a higher-order primitive carrying the function and its rule.
Each trace decides what to do with it: the eager trace just calls the
function, the JVP trace calls the rule, the batching trace batches both, and
the staging trace records the function as a sub-jaxpr (keeping the rule), so a
jitted function keeps its custom derivative when it is later differentiated.
"""
from __future__ import annotations

import functools
import inspect
import operator
from typing import Callable, Sequence

import numpy as np

from plax import dtypes, tree_util
from plax.core.interpret import jaxpr_as_fun
from plax.core import varying
from plax.core.pretty_print import pp_param_rules
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.trace import (Tracer, find_top_trace, full_lower, fun_name as tracing_fun_name,
                             get_aval, state as trace_state)
from plax.transforms.jvp import Zero, instantiate, tangent_aval, zeros_like_aval


class _CustomCallPrimitive(Primitive):
    """A primitive whose operands are traced through a Python function and a rule."""

    def __init__(self, name: str, process: str):
        super().__init__(name, multiple_results=True)
        self._process = process

    def bind_custom(self, *fun_and_rules_and_args, **params):
        n_fns = 2 if self._process == "process_custom_jvp_call" else 3
        fns, args = fun_and_rules_and_args[:n_fns], fun_and_rules_and_args[n_fns:]
        if trace_state.depth == 0:
            return list(fns[0](*args))
        trace = find_top_trace(args)
        tracers = [trace.full_raise(a) for a in args]
        outs = getattr(trace, self._process)(self, *fns, tracers, **params)
        return [full_lower(o) for o in outs]


# A staged call (an equation of a jaxpr) may have captured values its body closed over:
# they are its first ``num_consts`` operands. When the equation is evaluated again (a jitted
# function under grad or vmap), they are passed on as leading arguments, so each transform
# sees them (vmap batches them), while the rules skip them: a custom rule covers only the
# explicit arguments. ``closed_consts`` counts these leading values across re-staging.

class _CustomJVPCallPrimitive(_CustomCallPrimitive):
    def bind(self, *args, call_jaxpr, jvp, num_consts=0, closed_consts=0, **params):
        rule = _skip_leading_jvp(jvp, num_consts, len(args)) if num_consts else jvp
        return self.bind_custom(jaxpr_as_fun(call_jaxpr), rule, *args,
                                closed_consts=closed_consts + num_consts, **params)


class _CustomVJPCallPrimitive(_CustomCallPrimitive):
    def bind(self, *args, call_jaxpr, fwd, bwd, num_consts=0, closed_consts=0, **params):
        if num_consts:
            fwd, bwd = _skip_leading_fwd(fwd, num_consts), _skip_leading_bwd(bwd, num_consts)
        return self.bind_custom(jaxpr_as_fun(call_jaxpr), fwd, bwd, *args,
                                closed_consts=closed_consts + num_consts, **params)


def _skip_leading_jvp(jvp, n, n_primals):
    def rule(*primals_and_tangents):
        primals, tangents = primals_and_tangents[:n_primals], primals_and_tangents[n_primals:]
        return jvp(*primals[n:], *tangents[n:])

    rule.__name__ = getattr(jvp, "__name__", "jvp")
    return rule


def _skip_leading_fwd(fwd, n):
    def rule(*args, **perturbed):
        if perturbed:  # symbolic_zeros: which arguments have nonzero tangents
            perturbed = {"perturbed": perturbed["perturbed"][n:]}
        return fwd(*args[n:], **perturbed)

    rule.__name__ = getattr(fwd, "__name__", "fwd")
    return rule


def _skip_leading_bwd(bwd, n):
    def rule(res, cts):
        return [None] * n + list(bwd(res, cts))

    rule.__name__ = getattr(bwd, "__name__", "bwd")
    return rule


def check_closed_tangents(tangents, params, kind: str) -> None:
    """Raises if a value a custom_jvp/custom_vjp function closed over is being differentiated:
    the custom rule says nothing about it."""
    n = params.get("closed_consts", 0)
    if any(type(t) is not Zero for t in tangents[:n]):
        raise TypeError(f"A {kind} function is being differentiated with respect to a value it "
                        f"closes over (a traced value from an enclosing jit). Its custom rule "
                        f"only covers the explicit arguments: pass that value as an argument "
                        f"of the {kind} function and extend the rule to it.")


custom_jvp_call_p = _CustomJVPCallPrimitive("custom_jvp_call", "process_custom_jvp_call")
custom_vjp_call_p = _CustomVJPCallPrimitive("custom_vjp_call", "process_custom_vjp_call")
custom_jvp_call_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: list(call_jaxpr.out_avals))
custom_vjp_call_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: list(call_jaxpr.out_avals))
# inside shard_map(check_vma=True) their results are typed by the traced function (a psum in
# it makes its result invariant), not by their operands
varying.register_self_typed(custom_jvp_call_p)
varying.register_self_typed(custom_vjp_call_p)


def _pp_custom_call_params(params: dict) -> dict:
    # as JAX prints them: symbolic_zeros always (plax records it only when set), num_consts
    # only when the function closed over something
    shown = {k: v for k, v in params.items() if k != "num_consts" or v}
    shown.setdefault("symbolic_zeros", False)
    return shown


pp_param_rules[custom_jvp_call_p] = _pp_custom_call_params
pp_param_rules[custom_vjp_call_p] = _pp_custom_call_params


def _eval_custom_call(*args, call_jaxpr, **params):
    # the captured values are the call_jaxpr's leading invars, so all operands go in as is
    return jaxpr_as_fun(call_jaxpr)(*args)


register_rule("impl", custom_jvp_call_p)(_eval_custom_call)
register_rule("impl", custom_vjp_call_p)(_eval_custom_call)


# ------------------------------------------------------------------ custom_lin

custom_lin_p = Primitive("custom_lin", multiple_results=True)
custom_lin_p.def_abstract_eval(lambda *avals, num_res, bwd, out_avals, **_: list(out_avals))


def _forward_mode_error(*args, **params):
    # custom_lin is only ever transposed; evaluating (or batching, or differentiating) it
    # means its tangents are being pushed forward.
    err = TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")
    if hasattr(err, "add_note"):  # Python 3.11+: what to do, shown under the traceback
        err.add_note("Use jax.vjp / jax.grad (reverse mode), or define the rule with "
                     "custom_jvp instead to support jvp, jacfwd and hessian.")
    raise err


register_rule("impl", custom_lin_p)(_forward_mode_error)
register_rule("jvp", custom_lin_p)(_forward_mode_error)
register_rule("batch", custom_lin_p)(_forward_mode_error)


@register_rule("transpose", custom_lin_p)
def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, symbolic_zeros=False):
    res = args[:num_res]
    # symbolic_zeros: a zero cotangent goes to the rule as None (it becomes a SymbolicZero
    # there, where its abstract value is known; None passes through the batching wrappers)
    cts = [None if symbolic_zeros and type(c) is Zero else instantiate(c) for c in cts]
    cts_in = bwd(list(res), cts)
    return [None] * num_res + [None if c is None else c for c in cts_in]


# ------------------------------------------------------------------ helpers

def _resolve_args(fun, args, kwargs):
    """Positional arguments only: keyword arguments are bound through the signature."""
    if not kwargs:
        return tuple(args)
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        raise TypeError("keyword arguments to a custom_jvp/custom_vjp function need a "
                        "signature to resolve them") from None
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"keyword-only arguments are not supported by custom_jvp/custom_vjp "
                        f"functions, got {sorted(bound.kwargs)}")
    return tuple(bound.args)


def _as_operand(x):
    from plax.transforms.autodiff import _as_array
    return _as_array(x)


def _runs_eagerly(leaves) -> bool:
    """Whether a call of a custom_jvp/custom_vjp function involves no transform: no tracer
    among its arguments and no jit being staged. It then just calls the function."""
    if trace_state.depth == 0:
        return True
    return trace_state.dynamic.level == 0 and not any(isinstance(x, Tracer) for x in leaves)


def _call_eagerly(fun, args, kind: str):
    """``fun(*args)`` with no transform involved: what it returns is returned as is (a Python
    float stays a Python float, as in JAX). NumPy arguments get the canonical dtype first
    (float64 becomes float32 unless x64 is enabled), as they would on entering plax."""
    leaves, tree = tree_util.tree_flatten(args)
    canon = [_canonical_host(x) for x in leaves]
    if any(c is not x for c, x in zip(canon, leaves)):
        args = tree_util.tree_unflatten(tree, canon)
    out = fun(*args)
    from plax.transforms.staging import check_output
    for o in tree_util.tree_leaves(out):
        check_output(o, f"the {kind} function {tracing_fun_name(fun)}")
    return out


def _canonical_host(x):
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype != dtypes.float0:
        dt = dtypes.canonicalize_dtype(x.dtype)
        if dt != x.dtype:
            return x.astype(dt)
    return x


def _check_rule(rule, what: str, kind: str) -> None:
    """Raises TypeError when a rule given to defjvp/defvjp cannot be called (None means "no
    rule", reported when the function is called, as in JAX)."""
    if callable(rule) or rule is None:
        return
    raise TypeError(f"{kind}: the {what} rule must be a function, got {rule!r} of type "
                    f"{type(rule).__name__}. Pass the function itself (e.g. f.{kind.split('.')[-1]}"
                    f"({'f_fwd, f_bwd' if 'vjp' in kind else 'f_jvp'})), not its name or result.")


def _check_nondiff_argnums(nondiff_argnums, kind: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(i) for i in nondiff_argnums)
    except TypeError:
        raise TypeError(f"{kind}: nondiff_argnums must be a sequence of ints (the positions of "
                        f"the arguments that are not differentiated), got {nondiff_argnums!r}."
                        ) from None


def _split_nondiff(args, nondiff_argnums):
    nondiff = {i % len(args) for i in nondiff_argnums}
    static = [(i, a) for i, a in enumerate(args) if i in nondiff]
    dyn = [a for i, a in enumerate(args) if i not in nondiff]
    return static, dyn


def _is_symbolic_zero(x) -> bool:
    """Whether ``x`` is a :class:`plax.custom_derivatives.SymbolicZero` (by class name: that
    module is loaded only when user code uses it)."""
    return type(x).__name__ == "SymbolicZero" and hasattr(x, "aval")


def _as_custom_vjp_primals(xs, perturbed) -> list:
    """The primals of a ``symbolic_zeros=True`` forward rule, each with whether its tangent
    is nonzero (all perturbed where the caller does not say: a rule called outside reverse
    mode's linearization)."""
    from plax.custom_derivatives import CustomVJPPrimal
    perturbed = [True] * len(xs) if perturbed is None else perturbed
    return [CustomVJPPrimal(x, bool(p)) for x, p in zip(xs, perturbed)]


def _symbolic_zero(aval):
    """A :class:`plax.custom_derivatives.SymbolicZero` of ``aval`` (a tangent aval)."""
    from plax.custom_derivatives import SymbolicZero
    return SymbolicZero(aval)


def _check_symbolic_zero_cotangent(zero, want, arg, i: int, j: int) -> None:
    """JAX's ValueError for a SymbolicZero returned by a bwd rule whose shape or dtype is not
    that of the cotangent of its argument (leaf ``j`` of argument ``i``)."""
    if want.dtype == dtypes.float0 or (
            (tuple(zero.shape), zero.dtype) == (tuple(want.shape), want.dtype)):
        return  # (an integer argument's cotangent is a zero whatever the rule says, as in JAX)
    path = tree_util.tree_flatten_with_path(arg)[0][j][0]
    where = tree_util.keystr((tree_util.SequenceKey(i),) + tuple(path))
    raise ValueError(f"Custom VJP bwd rule produced a SymbolicZero with a shape/dtype that "
                     f"does not match the corresponding input tangent shape/dtype: at "
                     f"output{where} the SymbolicZero had shape/dtype {zero.aval.str_short()} "
                     f"while the corresponding input had shape/dtype {want.str_short()}. "
                     f"Consider just returning a None here instead of a SymbolicZero object.")


def forward_attr(self, name: str):
    """Looks up attributes the wrapper lacks on the wrapped function, as JAX's custom
    decorators do, so one can be applied over another (``custom_vjp`` over ``custom_vmap``:
    ``f.def_vmap`` still reaches the inner one)."""
    fun = self.__dict__.get("fun")
    if fun is None:  # not yet initialised (copy, unpickling)
        raise AttributeError(name)
    return getattr(fun, name)


def _merge(static, dyn):
    out, it = [], iter(dyn)
    pos = dict(static)
    for i in range(len(static) + len(dyn)):
        out.append(pos[i] if i in pos else next(it))
    return out


class custom_jvp:
    """A function with a custom JVP rule (JAX's ``jax.custom_jvp``).

    Example:
      >>> @jax.custom_jvp
      ... def f(x):
      ...     return jnp.sin(x)
      >>> @f.defjvp
      ... def f_jvp(primals, tangents):
      ...     (x,), (t,) = primals, tangents
      ...     return f(x), 2.0 * t
      >>> jax.grad(f)(0.0)
      Array(2., dtype=float32, weak_type=True)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        from plax.transforms.autodiff import check_callable
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = _check_nondiff_argnums(nondiff_argnums, "custom_jvp")
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Sets the rule ``jvp(primals, tangents) -> (primal_out, tangent_out)``
        (nondiff arguments come first: ``jvp(*nondiff, primals, tangents)``)."""
        _check_rule(jvp, "JVP", "custom_jvp.defjvp")
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Sets the rule from one function per argument, ``jvp_i(t_i, primal_out, *primals)``."""
        for rule in jvps:
            _check_rule(rule, "JVP", "custom_jvp.defjvps")

        def jvp(primals, tangents):
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                contrib = rule(t, out, *primals)
                total = contrib if total is None else tree_util.tree_map(
                    lambda a, b: a + b, total, contrib)
            if total is None:
                total = tree_util.tree_map(lambda o: zeros_like_aval(tangent_aval(get_aval(o))), out)
            return out, total

        self.defjvp(jvp)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    __getattr__ = forward_attr  # decorators stack: custom_vjp(custom_vmap(f)).def_vmap

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {self.__name__} using "
                                 "defjvp.")
        args = _resolve_args(self.fun, args, kwargs)
        static, dyn = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_util.tree_flatten(tuple(dyn))
        if _runs_eagerly(leaves):
            return _call_eagerly(self.fun, args, "custom_jvp")
        leaves = [_as_operand(x) for x in leaves]
        n = len(leaves)
        out_trees: list = []

        def flat_fun(*xs):
            out = self.fun(*_merge(static, tree_util.tree_unflatten(in_tree, xs)))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_trees.append(tree)
            return [_as_operand(o) for o in out_leaves]

        def flat_jvp(*xs):
            primals = tuple(tree_util.tree_unflatten(in_tree, xs[:n]))
            t_leaves = xs[n:]
            if self.symbolic_zeros:  # a zero tangent comes as None: the rule sees JAX's form
                t_leaves = [_symbolic_zero(tangent_aval(get_aval(p))) if t is None else t
                            for p, t in zip(xs[:n], t_leaves)]
            tangents = tuple(tree_util.tree_unflatten(in_tree, t_leaves))
            nondiff = [a for _, a in static]
            res = self.jvp(*nondiff, primals, tangents)
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"Custom JVP rule {getattr(self.jvp, '__name__', self.jvp)} must "
                                f"produce a pair (list or tuple of length two) representing primal "
                                f"and tangent outputs, but got {res!r}.")
            p_out, t_out = res
            p_leaves, p_tree = tree_util.tree_flatten(p_out)
            t_leaves, t_tree = tree_util.tree_flatten(t_out)
            if p_tree != t_tree:
                raise TypeError(f"Custom JVP rule must produce primal and tangent outputs with "
                                f"equal container (pytree) structures, but got {p_tree} and "
                                f"{t_tree} respectively.")
            out_trees.append(p_tree)
            p_leaves = [_as_operand(p) for p in p_leaves]
            fixed = []
            for p, t in zip(p_leaves, t_leaves):
                if _is_symbolic_zero(t):  # a rule written for symbolic_zeros=True may return one
                    t = zeros_like_aval(tangent_aval(get_aval(p)))
                t = _as_operand(t) if not (isinstance(t, np.ndarray) and t.dtype == dtypes.float0) else t
                pa, ta = get_aval(p), get_aval(t)
                if pa.shape != ta.shape:
                    raise ValueError(f"Custom JVP rule must produce primal and tangent outputs "
                                     f"with equal shapes, got {pa.shape} and {ta.shape}.")
                want = tangent_aval(pa).dtype
                if ta.dtype != want and want != dtypes.float0:
                    from plax import lax
                    t = lax.convert_element_type(t, want)
                fixed.append(t)
            return p_leaves + fixed

        flat_jvp.__name__ = getattr(self.jvp, "__name__", "jvp")  # how the jaxpr names it
        sz = {"symbolic_zeros": True} if self.symbolic_zeros else {}
        outs = custom_jvp_call_p.bind_custom(flat_fun, flat_jvp, *leaves,
                                             name=getattr(self, "__name__", "fun"), **sz)
        return tree_util.tree_unflatten(out_trees[-1], outs)


class custom_vjp:
    """A function with a custom VJP rule (JAX's ``jax.custom_vjp``).

    Example:
      >>> @jax.custom_vjp
      ... def clip_gradient(x):
      ...     return x
      >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (jnp.clip(g, -1, 1),))
      >>> jax.grad(lambda x: 3.0 * clip_gradient(x))(1.0)
      Array(1., dtype=float32, weak_type=True)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        from plax.transforms.autodiff import check_callable
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = _check_nondiff_argnums(nondiff_argnums, "custom_vjp")
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = False

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
        """Sets ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, ct) -> tuple of cotangents``
        (nondiff arguments come first in ``bwd``: ``bwd(*nondiff, residuals, ct)``)."""
        _check_rule(fwd, "fwd", "custom_vjp.defvjp")
        _check_rule(bwd, "bwd", "custom_vjp.defvjp")
        self.fwd = fwd
        self.bwd = bwd
        self.symbolic_zeros = symbolic_zeros

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    __getattr__ = forward_attr  # decorators stack: custom_vjp(custom_vmap(f)).def_vmap

    def __call__(self, *args, **kwargs):
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {self.__name__} using "
                                 "defvjp.")
        args = _resolve_args(self.fun, args, kwargs)
        static, dyn = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_util.tree_flatten(tuple(dyn))
        if _runs_eagerly(leaves):
            return _call_eagerly(self.fun, args, "custom_vjp")
        leaves = [_as_operand(x) for x in leaves]
        in_avals = [get_aval(x) for x in leaves]
        out_trees: list = []
        res_trees: list = []

        def flat_fun(*xs):
            out = self.fun(*_merge(static, tree_util.tree_unflatten(in_tree, xs)))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_trees.append(tree)
            return [_as_operand(o) for o in out_leaves]

        out_avals: list = []

        def flat_fwd(*xs, perturbed=None):
            if self.symbolic_zeros:  # JAX's form: each primal as CustomVJPPrimal(value, perturbed)
                xs = _as_custom_vjp_primals(xs, perturbed)
            res = self.fwd(*_merge(static, tree_util.tree_unflatten(in_tree, xs)))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"Custom VJP fwd rule {getattr(self.fwd, '__name__', self.fwd)} "
                                f"must produce a pair (list or tuple of length two) where the first "
                                f"element represents the primal output and the second the "
                                f"residuals, but got {res!r}.")
            out, residuals = res
            out_leaves, tree = tree_util.tree_flatten(out)
            out_trees.append(tree)
            r_leaves, r_tree = tree_util.tree_flatten(residuals)
            res_trees.append(r_tree)
            out_leaves = [_as_operand(o) for o in out_leaves]
            out_avals[:] = [tangent_aval(get_aval(o)) for o in out_leaves]
            return out_leaves, [_as_operand(r) for r in r_leaves]

        def flat_bwd(res_leaves, ct_leaves):
            residuals = tree_util.tree_unflatten(res_trees[-1], res_leaves)
            if any(c is None for c in ct_leaves):  # symbolic_zeros: zero cotangents
                ct_leaves = [_symbolic_zero(a) if c is None else c
                             for a, c in zip(out_avals, ct_leaves)]
            cts = tree_util.tree_unflatten(out_trees[-1], ct_leaves)
            nondiff = [a for _, a in static]
            cts_in = self.bwd(*nondiff, residuals, cts)
            if not isinstance(cts_in, (tuple, list)):
                raise TypeError(f"Custom VJP bwd rule must produce a tuple with one cotangent per "
                                f"(non-static) primal argument, got {type(cts_in).__name__}.")
            if len(cts_in) != len(dyn):
                raise TypeError(f"Custom VJP bwd rule must produce an output with the same "
                                f"container (pytree) structure as the args tuple of the primal "
                                f"function: it returned {len(cts_in)} cotangents for "
                                f"{len(dyn)} arguments.")
            flat = []
            for i, (arg, ct) in enumerate(zip(dyn, cts_in)):
                arg_leaves = tree_util.tree_leaves(arg)
                if ct is None:
                    flat.extend(Zero(tangent_aval(get_aval(_as_operand(a)))) for a in arg_leaves)
                    continue
                ct_l, ct_tree = tree_util.tree_flatten(ct, is_leaf=lambda x: x is None)
                if len(ct_l) != len(arg_leaves):
                    raise TypeError(f"Custom VJP bwd rule returned a cotangent of structure "
                                    f"{ct_tree} for an argument of structure "
                                    f"{tree_util.tree_structure(arg)}.")
                for j, (a, c) in enumerate(zip(arg_leaves, ct_l)):
                    want = tangent_aval(get_aval(_as_operand(a)))
                    if _is_symbolic_zero(c):
                        _check_symbolic_zero_cotangent(c, want, arg, i, j)
                    flat.append(Zero(want) if c is None or _is_symbolic_zero(c)
                                else _as_operand(c))
            return flat

        flat_fwd.__name__ = getattr(self.fwd, "__name__", "fwd")  # how the jaxpr names them
        flat_bwd.__name__ = getattr(self.bwd, "__name__", "bwd")
        sz = {"symbolic_zeros": True} if self.symbolic_zeros else {}
        outs = custom_vjp_call_p.bind_custom(flat_fun, flat_fwd, flat_bwd, *leaves,
                                             name=getattr(self, "__name__", "fun"), **sz)
        del in_avals
        return tree_util.tree_unflatten(out_trees[-1], outs)


def closure_convert(fun: Callable, *example_args) -> tuple[Callable, list]:
    """Makes the traced values a function closes over into explicit arguments.

    ``custom_vjp`` functions must not close over values that enclosing transforms trace
    (their cotangents would be lost); ``closure_convert`` traces ``fun`` on the shapes of
    ``example_args`` and hoists every closed-over floating-point value that is a tracer of an
    enclosing transform out as an extra trailing argument. Constants that no transform
    traces stay closed over.

    Args:
      fun: the function to convert.
      *example_args: arrays (or pytrees of arrays) with the shapes and dtypes ``fun`` will be
        called with; only their abstract values are used.

    Returns:
      ``(converted, hoisted)``: ``converted(*args, *hoisted)`` equals ``fun(*args)``, and
      ``hoisted`` is the list of hoisted values (empty when nothing traced is closed over).

    Raises:
      TypeError: ``converted`` called with arguments whose structure differs from
        ``example_args``'s.

    Example:
      >>> def outer(w):
      ...     f = lambda x: jnp.sin(w * x)
      ...     g, consts = plax.closure_convert(f, 1.0)
      ...     return g(2.0, *consts)
      >>> plax.grad(outer)(0.5)   # d/dw sin(2w) = 2 cos(1)
      Array(1.0806046, dtype=float32, weak_type=True)
    """
    from plax.core.interpret import eval_jaxpr
    from plax.transforms.staging import trace_to_jaxpr
    flat, in_tree = tree_util.tree_flatten(example_args)
    avals = [get_aval(_as_operand(v)) for v in flat]
    out_trees = []

    def flat_fun(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, list(leaves)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_trees.append(out_tree)
        return out_leaves

    closed, _ = trace_to_jaxpr(flat_fun, avals, where="the function given to closure_convert")
    consts = list(closed.consts)
    hoist = [isinstance(c, Tracer) and dtypes.issubdtype(get_aval(c).dtype, np.inexact)
             for c in consts]
    hoisted = [c for c, h in zip(consts, hoist) if h]
    n_args = len(flat)

    def converted(*args_and_hoisted):
        args = args_and_hoisted[:len(args_and_hoisted) - len(hoisted)]
        given = iter(args_and_hoisted[len(args):])
        leaves, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree or len(leaves) != n_args:
            raise TypeError(f"closure_convert: the converted function was called with arguments "
                            f"structured as {tree}, but converted for {in_tree}; call it with "
                            f"arguments like example_args, then the {len(hoisted)} hoisted values.")
        all_consts = [next(given) if h else c for c, h in zip(consts, hoist)]
        out = eval_jaxpr(closed.jaxpr, all_consts, *leaves)
        return tree_util.tree_unflatten(out_trees[-1], out)

    converted.__name__ = getattr(fun, "__name__", "converted")
    return converted, hoisted

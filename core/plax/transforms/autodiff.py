"""The differentiation API: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian.

Reverse mode is linearize + transpose. Linearize runs the JVP trace with the
tangent inputs being tracers of a staging trace installed *below* it: primal
operations run as usual (eagerly, or in whatever outer trace), while every
operation that touches a tangent is recorded into a jaxpr that is linear in the
tangent inputs. ``vjp`` then evaluates that jaxpr backwards with each
primitive's transpose rule (:mod:`plax.transforms.transpose`).
"""
from __future__ import annotations

import functools
import math
import operator
from typing import Callable, Sequence

import numpy as np

from plax import dtypes, tree_util
from plax.core import varying as _varying
from plax.core.interpret import eval_jaxpr
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.passes import dce, has_unread_call_outputs
from plax.core.trace import DebugInfo, get_aval, new_main
from plax.transforms.jvp import (Zero, instantiate, jvp_flat, tangent_aval,
                                 tangent_dtype, zeros_like_aval)
from plax.transforms.staging import JaxprBuilder, LinearizeTrace
from plax.transforms.transpose import backward_pass


def _as_array(x):
    from plax.array import Array
    from plax.core.trace import Tracer
    if isinstance(x, (Array, Tracer)) or (isinstance(x, np.ndarray) and x.dtype == dtypes.float0):
        return x
    if type(getattr(x, "aval", None)).__name__ == "AbstractRef":  # a plax.new_ref ref
        return x
    from plax.array import from_host
    return from_host(x)


def check_callable(fun, transform: str) -> None:
    """The TypeError JAX raises when a transform is applied to something that is not callable."""
    if not callable(fun):
        raise TypeError(f"{transform} requires a callable as its first argument (the function to "
                        f"transform), got {fun!r} of type {type(fun).__name__}. Pass the function "
                        f"itself, e.g. {transform}(f), not its name or the result of calling it.")


def _check_tangent(p, t, where="jvp"):
    _check_tangent_aval(get_aval(p), t, where)


def _check_tangent_aval(pa, t, where):
    ta = get_aval(t)
    if _is_ref_aval(pa) != _is_ref_aval(ta):
        raise ValueError(f"{where}: the tangent of a mutable array reference must be a mutable "
                         f"array reference (jax.new_ref(t)), and the tangent of an array an "
                         f"array; got primal type {pa} and tangent type {ta}.")
    if pa.shape != ta.shape:
        raise ValueError(f"{where} called with different primal and tangent shapes;Got primal "
                         f"shape {pa.shape} and tangent shape as {ta.shape}")
    want = tangent_dtype(pa.dtype)
    if ta.dtype != want:
        raise TypeError(f"primal and tangent arguments to jax.{where} do not match; dtypes must be "
                        f"equal, or in case of int/bool primal dtype the tangent dtype must be "
                        f"float0.Got primal dtype {pa.dtype.name} and so expected tangent dtype "
                        f"{want.name if want != dtypes.float0 else 'float0'}, but got tangent "
                        f"dtype {ta.dtype.name if ta.dtype != dtypes.float0 else 'float0'} instead.")


def _is_ref_aval(aval) -> bool:
    return type(aval).__name__ == "AbstractRef"  # the core does not import plax.state


def _flatten_fun(fun, in_tree):
    """``fun`` on flat leaves; its output tree lands in the returned box."""
    box: list = []

    def flat(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, leaves))
        leaves_out, tree = tree_util.tree_flatten(out)
        box[:] = [tree]
        return leaves_out

    return flat, box


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """Forward-mode derivative: ``(fun(*primals), J @ tangents)``.

    Args:
      fun: a function of arrays (pytrees) returning arrays (pytrees).
      primals: a tuple or list of the arguments.
      tangents: a tuple or list of tangents, with the primals' structure, shapes and dtypes
        (float0 for integer primals).
      has_aux: ``fun`` returns ``(out, aux)``; aux is returned unchanged.

    Returns:
      ``(primals_out, tangents_out)`` (plus ``aux`` when ``has_aux``).

    Example:
      >>> jax.jvp(jnp.sin, (0.0,), (1.0,))
      (Array(0., dtype=float32, weak_type=True), Array(1., dtype=float32, weak_type=True))
    """
    check_callable(fun, "jvp")
    return _jvp(fun, primals, tangents, has_aux, None)


def _jvp(fun, primals, tangents, has_aux, debug):
    """:func:`jvp`; ``debug`` names the transform and the user's arguments in errors (None:
    ``jvp`` of ``fun``'s positional arguments)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"primal and tangent arguments to jax.jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents have "
                        f"tree structure {t_tree}.")
    p_leaves = [_as_array(p) for p in p_leaves]
    t_leaves = [_as_array(t) for t in t_leaves]
    for p, t in zip(p_leaves, t_leaves):
        _check_tangent(p, t)
    t_leaves = [_tangent_like(get_aval(p), t) for p, t in zip(p_leaves, t_leaves)]
    flat, trees = _flatten_with_aux(fun, p_tree, has_aux)
    out_p, out_t = jvp_flat(flat, p_leaves, t_leaves, debug or DebugInfo("jvp", fun, p_tree))
    out_tree, aux_tree, n_out = trees
    primals_out = tree_util.tree_unflatten(out_tree, out_p[:n_out])
    tangents_out = tree_util.tree_unflatten(out_tree, [instantiate(t) for t in out_t[:n_out]])
    if has_aux:
        return primals_out, tangents_out, tree_util.tree_unflatten(aux_tree, out_p[n_out:])
    return primals_out, tangents_out


def _tangent_like(pa, t):
    """The input tangent ``t`` of a primal of abstract value ``pa``: a symbolic zero for a float0
    tangent, else ``t`` with the primal's weak type. JAX's numpy functions give a tangent the
    weak type of its primal, so a Python-scalar primal has weakly typed output tangents even
    when the tangent given is a float32 array."""
    ta = get_aval(t)
    if ta.dtype == dtypes.float0:
        return Zero(tangent_aval(pa))
    if ta.weak_type != pa.weak_type:
        from plax import lax
        t = lax.convert_element_type(t, ta.dtype, pa.weak_type)
    return t


def _flatten_with_aux(fun, in_tree, has_aux):
    """``fun`` on flat leaves returning main outputs then aux leaves; the output tree, aux tree
    and number of main outputs land in the returned list once it has run."""
    trees: list = [None, None, 0]

    def flat(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, leaves))
        aux_leaves = []
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair "
                                f"(output, aux), got {type(out).__name__}"
                                + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
                                + ".")
            out, aux = out
            aux_leaves, trees[1] = tree_util.tree_flatten(aux)
        out_leaves, trees[0] = tree_util.tree_flatten(out)
        trees[2] = len(out_leaves)
        return out_leaves + list(aux_leaves)

    return flat, trees


# ------------------------------------------------------------------ linearize

def linearize_flat(fun: Callable, primals: list, n_aux: Callable[[], int] = lambda: 0,
                   debug: DebugInfo | None = None) -> tuple[list, ClosedJaxpr]:
    """Runs ``fun`` forward and stages its linearisation.

    Args:
      fun: flat function; its last ``n_aux()`` outputs are auxiliary (not differentiated).
      primals: the flat inputs.
      debug: names the transform and the user's arguments in errors.

    Returns:
      ``(primal_outputs, linear_jaxpr)``: ``linear_jaxpr`` maps input tangents to the
      tangents of the non-auxiliary outputs (one invar per primal, float0 for integer ones).
    """
    in_avals = [tangent_aval(get_aval(p)) for p in primals]
    with new_main(LinearizeTrace, payload=JaxprBuilder()) as stage_main:
        stage = LinearizeTrace(stage_main)
        t_in = [stage.new_arg(a) for a in in_avals]
        tangents = [Zero(a) if a.dtype == dtypes.float0 else t for a, t in zip(in_avals, t_in)]
        out_p, out_t = jvp_flat(fun, primals, tangents, debug)
        out_t = out_t[:len(out_t) - n_aux()]
        t_out = []
        for t in out_t:
            if type(t) is Zero:
                t = zeros_like_aval(t.aval)
            t_out.append(stage.full_raise(_as_array(t)))
        jaxpr, consts = stage_main.payload.build(t_in, t_out)
    jaxpr, consts = _discharged(jaxpr, consts)
    if has_unread_call_outputs(jaxpr):
        # A call (jit) whose tangent outputs are not all read keeps only those read, and drops
        # the residuals it no longer needs, as in JAX: the backward pass then binds only that.
        jaxpr = dce(jaxpr)
        read = {v for e in jaxpr.eqns for v in e.invars} | set(jaxpr.outvars)
        kept = [(v, c) for v, c in zip(jaxpr.constvars, consts) if v in read]
        jaxpr = Jaxpr([v for v, _ in kept], jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
        consts = [c for _, c in kept]
    return out_p, ClosedJaxpr(jaxpr, consts)


def _discharged(jaxpr: Jaxpr, consts: list) -> tuple[Jaxpr, list]:
    """The linear jaxpr with its tangent refs discharged (reads and writes turned into
    indexing and scatters, which transpose), as JAX transposes a program with refs."""
    from plax.state.discharge import discharge_closed, jaxpr_has_refs
    if not jaxpr_has_refs(jaxpr):
        return jaxpr, consts
    pure, _ = discharge_closed(ClosedJaxpr(jaxpr, consts), ref_consts_as_values=True)
    return pure.jaxpr, list(pure.consts)


def linearize(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the JVP at ``primals``
    from a staged linear function (no re-running of ``fun``). With ``has_aux``, ``fun``
    returns ``(output, aux)`` and the result is ``(output, f_jvp, aux)``, aux not
    differentiated.

    ``f_jvp`` is a :class:`plax.tree_util.Partial` whose leaves are the residuals (the
    primal values the linear function needs), so it can be returned from ``jit`` or passed
    through ``vmap``.

    Example:
      >>> y, f_jvp = jax.linearize(jnp.sin, 1.0)
      >>> f_jvp(1.0)  # cos(1.0)
      Array(0.5403023, dtype=float32, weak_type=True)
    """
    check_callable(fun, "linearize")
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    p_leaves = [_as_array(p) for p in p_leaves]
    if has_aux:
        flat, trees = _flatten_with_aux(fun, p_tree, True)
        outs, lin = linearize_flat(flat, p_leaves, lambda: trees[1].num_leaves,
                                   debug=DebugInfo("linearize", fun, p_tree))
        out_tree, aux_tree, n_out = trees
        f_jvp = _LinearizedJVP(lin.jaxpr, p_tree, out_tree, [get_aval(p) for p in p_leaves])
        return (tree_util.tree_unflatten(out_tree, outs[:n_out]),
                tree_util.Partial(f_jvp, *lin.consts),
                tree_util.tree_unflatten(aux_tree, outs[n_out:]))
    flat, box = _flatten_fun(fun, p_tree)
    out_p, lin = linearize_flat(flat, p_leaves, debug=DebugInfo("linearize", fun, p_tree))
    out_tree = box[0]
    f_jvp = _LinearizedJVP(lin.jaxpr, p_tree, out_tree, [get_aval(p) for p in p_leaves])
    return tree_util.tree_unflatten(out_tree, out_p), tree_util.Partial(f_jvp, *lin.consts)


class _LinearizedJVP:
    """The static part of ``linearize``'s function: the linear jaxpr and the structures.

    Called as ``self(*residuals, *tangents)`` by the Partial holding the residuals. Compared
    by identity, like the function of any Partial, so a treedef holding it is hashable.
    """

    def __init__(self, jaxpr, in_tree, out_tree, in_avals):
        self.jaxpr = jaxpr
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.in_avals = in_avals
        self.__name__ = "f_jvp"

    def __call__(self, *residuals_and_tangents):
        n = len(self.jaxpr.constvars)
        residuals, tangents = residuals_and_tangents[:n], residuals_and_tangents[n:]
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != self.in_tree:
            raise TypeError(f"linearized function called with tangents of structure {t_tree}, "
                            f"expected {self.in_tree}")
        t_leaves = [_as_array(t) for t in t_leaves]
        for a, t in zip(self.in_avals, t_leaves):
            _check_tangent_aval(a, t, "linearize")
        outs = eval_jaxpr(self.jaxpr, list(residuals), *t_leaves)
        return tree_util.tree_unflatten(self.out_tree, outs)


# ------------------------------------------------------------------ vjp

def _sharding_differs(ct, ct_aval, out_aval) -> bool:
    """Whether a cotangent is split otherwise than the output it belongs to (explicit
    sharding: JAX refuses it rather than resharding). An untyped traced cotangent (the
    basis ``jacrev`` maps over) is accepted, as JAX accepts jacrev's."""
    from plax.core.trace import Tracer
    from plax.sharding_types import type_dims
    if isinstance(ct, Tracer) and ct_aval.sharding is None:
        return False
    return type_dims(ct_aval) != type_dims(out_aval)


def _as_reduced(aval) -> str:
    """``aval``'s type with its unreduced axes reduced, as JAX prints a cotangent's type for
    an unreduced output: ``float32[]{V:X, U:Y}`` -> ``float32[]{V:X, R:Y}``."""
    text = str(aval)
    return text[:text.index("{")] + text[text.index("{"):].replace("U:", "R:")


class _VJPFunction:
    """The function ``vjp`` returns: maps output cotangents to input cotangents (a tuple).

    It is a pytree, as in JAX: its leaves are the residuals (the primal values the backward
    pass needs) and its static part is the linear jaxpr with the argument structures, so it
    can be returned from ``jit``, passed through ``vmap`` and traced by ``make_jaxpr``.
    """

    __slots__ = ("static", "residuals")

    def __init__(self, static: "_VJPStatic", residuals: list):
        self.static = static
        self.residuals = residuals

    def __call__(self, *cts):
        if len(cts) != 1:
            raise TypeError(f"The function returned by vjp takes one argument (a cotangent with "
                            f"the structure of the primal output), got {len(cts)}.")
        st = self.static
        for aval in st.in_avals:
            if _is_ref_aval(aval):
                # as JAX 0.10.2: a mutable array reference has no cotangent to return
                raise ValueError(f"Expected cotangent type {aval} but got {aval.inner_aval}")
        ct_leaves, ct_tree = tree_util.tree_flatten(cts[0])
        if ct_tree != st.out_tree:
            raise ValueError(f"unexpected tree structure of argument to vjp function: got "
                             f"{ct_tree}, but expected to match {st.out_tree}")
        flat = []
        for ct, aval in zip(ct_leaves, st.out_avals):
            ct = _as_array(ct)
            ca = get_aval(ct)
            want = tangent_aval(aval)
            if ca.shape != aval.shape:
                raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to vjp "
                                 f"function: got {ca.str_short()}, but expected "
                                 f"{want.str_short()} because the corresponding output of the "
                                 f"function had shape {aval.shape}.")
            if _varying.unreduced_of(aval):
                # a cotangent of partial sums would be typed reduced over those axes
                # ({V:X, R:Y}), which nothing in plax makes: JAX's error for any other
                raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to VJP "
                                 f"function: got {ca}, but expected {_as_reduced(aval)} "
                                 f"because the corresponding output of the differentiated "
                                 f"function had JAX type {aval}")
            if (ca.sharding is not None or aval.sharding is not None) and \
                    _sharding_differs(ct, ca, aval):
                raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to VJP "
                                 f"function: got {ca}, but expected {aval} because the "
                                 f"corresponding output of the differentiated function had "
                                 f"JAX type {aval}")
            if ca.dtype != want.dtype and not (want.dtype == dtypes.float0):
                if dtypes.is_inexact(ca.dtype) and dtypes.is_inexact(want.dtype):
                    from plax import lax
                    ct = lax.convert_element_type(ct, want.dtype)
                else:
                    raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to "
                                     f"vjp function: got {ca.str_short()}, but expected "
                                     f"{want.str_short()} because the corresponding output of "
                                     f"the function had type {aval.str_short()}.")
            flat.append(Zero(want) if want.dtype == dtypes.float0 else ct)
        cts_in = backward_pass(st.jaxpr, self.residuals, flat)
        out = [instantiate(c) if type(c) is Zero else c for c in cts_in]
        out = [_match_dtype(c, a) for c, a in zip(out, st.in_avals)]
        return tree_util.tree_unflatten(st.in_tree, out)

    def __repr__(self) -> str:
        return f"<vjp function of {self.static.name}>"


class _VJPStatic:
    """The static part of a :class:`_VJPFunction` (its treedef's aux data), compared by
    identity: two vjp functions have equal structures when they come from the same
    linearisation (e.g. one traced ``jit`` called twice)."""

    __slots__ = ("jaxpr", "in_tree", "out_tree", "in_avals", "out_avals", "name")

    def __init__(self, jaxpr, in_tree, out_tree, in_avals, out_avals, name):
        self.jaxpr = jaxpr
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.in_avals = in_avals
        self.out_avals = out_avals
        self.name = name

    def __repr__(self) -> str:
        return f"vjp({self.name})"


tree_util.register_pytree_node(
    _VJPFunction, lambda f: (f.residuals, f.static),
    lambda static, residuals: _VJPFunction(static, list(residuals)))


def _match_dtype(ct, aval):
    """The cotangent with the input's tangent dtype. Its weak type is what the backward pass
    gave it, as in JAX: the rules' constants are weakly typed like their operands, so a
    Python-float primal's cotangent is weakly typed when only weakly typed values flowed into
    it, and strongly typed when a strongly typed cotangent did
    (``vjp(jnp.sin, 2.0)[1](jnp.float32(1))``) or a rule makes it so (``real``'s transpose,
    ``pow``'s derivative)."""
    want = tangent_aval(aval)
    if isinstance(ct, np.ndarray) and ct.dtype == dtypes.float0:
        return ct
    ca = get_aval(ct)
    if want.dtype != dtypes.float0 and ca.dtype != want.dtype:
        from plax import lax
        ct = lax.convert_element_type(ct, want.dtype, ca.weak_type)
    return ct


def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes: Sequence = ()):
    """Reverse-mode derivative: ``(fun(*primals), vjp_fun)`` with ``vjp_fun(ct)`` returning the
    tuple of cotangents of ``primals``. ``reduce_axes`` is JAX's removed option: only ``()``
    is accepted (NotImplementedError otherwise, as in JAX).

    ``vjp_fun`` is a pytree whose leaves are the residuals, so it can be returned from ``jit``
    or mapped over with ``vmap``.

    Example:
      >>> y, f_vjp = jax.vjp(jnp.sin, 0.0)
      >>> f_vjp(1.0)
      (Array(1., dtype=float32, weak_type=True),)
    """
    check_callable(fun, "vjp")
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated (removed in JAX; "
                                  "plax never had it)")
    return _vjp(fun, primals, has_aux, DebugInfo("vjp", fun))


def _vjp(fun, primals, has_aux, debug: DebugInfo):
    """:func:`vjp`; ``debug`` (its ``in_tree`` filled in here) names the transform and the
    user's arguments in errors."""
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    p_leaves = [_as_array(p) for p in p_leaves]
    debug.in_tree = p_tree
    flat, trees = _flatten_with_aux(fun, p_tree, has_aux)
    outs, lin = linearize_flat(flat, p_leaves,
                               lambda: trees[1].num_leaves if has_aux else 0, debug)
    out_tree, aux_tree, n_out = trees
    out_p = outs[:n_out]  # returned as the function returned them (a Python float stays one)
    static = _VJPStatic(lin.jaxpr, p_tree, out_tree, [get_aval(p) for p in p_leaves],
                        [get_aval(o) for o in out_p], debug.func_name)
    f_vjp = _VJPFunction(static, list(lin.consts))
    out = tree_util.tree_unflatten(out_tree, out_p)
    if has_aux:
        return out, f_vjp, tree_util.tree_unflatten(aux_tree, outs[n_out:])
    return out, f_vjp


# ------------------------------------------------------------------ grad

def _normalize_argnums(argnums, transform: str) -> tuple[bool, tuple[int, ...]]:
    """``(single, nums)`` for an ``argnums`` given to a transform: checked when the transform
    is applied, as JAX does (an int, or a non-empty sequence of ints)."""
    try:
        return True, (operator.index(argnums),)
    except TypeError:
        pass
    try:
        nums = tuple(operator.index(a) for a in argnums)
    except TypeError:
        raise TypeError(f"{transform}: argnums must be an int or a tuple of ints (the "
                        f"positions of the arguments to differentiate), got {argnums!r} of type "
                        f"{type(argnums).__name__}. For example argnums=0 or argnums=(0, 1)."
                        ) from None
    if not nums:
        raise ValueError(f"{transform} requires at least one argnum to differentiate with "
                         f"respect to; got argnums={argnums!r}. Pass e.g. argnums=0.")
    return False, nums


def _resolve_argnums(nums, nargs, transform, argnums):
    """``nums`` as non-negative positions among ``nargs`` positional arguments.

    Out-of-range positions are only detectable at call time; ``grad`` reports them as a
    TypeError, the Jacobian transforms as a ValueError, as in JAX."""
    for a in nums:
        if not -nargs <= a < nargs:
            if transform == "grad":
                raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                                f"least {max(a, -a - 1) + 1} positional arguments to be passed by "
                                f"the caller, but got only {nargs} positional arguments.")
            raise ValueError(f"{transform}: argnums={argnums} refers to positional argument {a}, "
                             f"but the function was called with {nargs} positional arguments; "
                             f"argnums must lie in [-{nargs}, {nargs}). Pass the argument "
                             "positionally or change argnums.")
    return tuple(a % nargs for a in nums)


def _dynamic_args(fun, args, kwargs, nums, fun_name, holomorphic, allow_int):
    """Splits off the differentiated positional arguments (at positions ``nums``).

    Returns:
      ``(dyn, partial_fun)``: the tuple of differentiated arguments (dtypes checked, errors
      naming ``fun_name``) and ``fun`` as a function of those alone.
    """
    dyn = tuple(args[i] for i in nums)
    for leaf in tree_util.tree_leaves(dyn):
        _check_input_dtype(_as_array(leaf), holomorphic, allow_int, fun_name)

    def partial_fun(*dyn_args):
        full = list(args)
        for i, a in zip(nums, dyn_args):
            full[i] = a
        return fun(*full, **kwargs)

    return dyn, partial_fun


def _check_input_dtype(x, holomorphic, allow_int, fun_name):
    dt = get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{fun_name} with holomorphic=True requires inputs with complex dtype, "
                            f"but got {dt.name}.")
    elif dtypes.is_integer(dt) or dtypes.is_bool(dt):
        if not allow_int:
            raise TypeError(f"{fun_name} requires real- or complex-valued inputs (input dtype that "
                            f"is a sub-dtype of np.inexact), but got {dt.name}. If you want to use "
                            f"Boolean- or integer-valued inputs, use vjp or set allow_int to True.")
    elif not dtypes.is_inexact(dt):
        raise TypeError(f"{fun_name} requires numerical-valued inputs, got {dt}.")


def _check_scalar_output(ans, holomorphic, fun_name):
    leaves, tree = tree_util.tree_flatten(ans)
    if not tree_util.treedef_is_leaf(tree) or len(leaves) != 1:
        # a list/tuple/dict holding a scalar is not a scalar
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {ans}. "
                        "Return a single scalar array (use has_aux=True to return more).")
    aval = get_aval(leaves[0])
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{aval.shape}.")
    dt = aval.dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{fun_name} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError(f"{fun_name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {dt.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex outputs, use jax.vjp "
                        "directly.")
    elif not dtypes.is_float(dt):
        raise TypeError(f"{fun_name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {dt.name}. For differentiation of "
                        "functions with integer outputs, use jax.vjp directly.")


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False,
                   reduce_axes: Sequence = ()) -> Callable:
    """A function returning ``(fun(*args), gradient)``: the gradient of scalar ``fun``
    with respect to the positional arguments ``argnums``.

    Args:
      fun: a function returning a real scalar (``(scalar, aux)`` with ``has_aux``).
      argnums: which positional arguments to differentiate (an int or a tuple of ints).
      has_aux: ``fun`` returns ``(value, aux)``; the result is ``((value, aux), grad)``.
      holomorphic: differentiate a complex-to-complex holomorphic function.
      allow_int: allow integer inputs (their gradients are float0 zeros).

    Returns:
      The function computing ``(value, grad)``; grad has the structure of the argument
      (a tuple of them for a tuple ``argnums``).

    Example:
      >>> jax.value_and_grad(lambda x: x ** 2)(3.0)
      (Array(9., dtype=float32, weak_type=True), Array(6., dtype=float32, weak_type=True))
    """
    return _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, "value_and_grad")


def _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, transform):
    check_callable(fun, transform)
    single, nums = _normalize_argnums(argnums, transform)

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        pos = _resolve_argnums(nums, len(args), "grad", argnums)
        # JAX's input checks say "grad" for value_and_grad too
        dyn, partial_fun = _dynamic_args(fun, args, kwargs, pos, "grad", holomorphic, allow_int)
        debug = DebugInfo(transform, fun, argnums=pos)
        if has_aux:
            ans, f_vjp, aux = _vjp(partial_fun, dyn, True, debug)
        else:
            ans, f_vjp = _vjp(partial_fun, dyn, False, debug)
        _check_scalar_output(ans, holomorphic, "grad")
        from plax import lax
        g = f_vjp(lax.full_like(ans, 1))
        g = g[0] if single else tuple(g)
        return ((ans, aux) if has_aux else ans), g

    return value_and_grad_f


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False, reduce_axes: Sequence = ()) -> Callable:
    """The gradient of scalar ``fun`` with respect to positional arguments ``argnums``.

    Example:
      >>> f = lambda x: x ** 3 + 2 * x
      >>> jax.grad(f)(2.0), jax.grad(jax.grad(f))(2.0)
      (Array(14., dtype=float32, weak_type=True), Array(12., dtype=float32, weak_type=True))
    """
    vg = _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, "grad")

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        out, g = vg(*args, **kwargs)
        if has_aux:
            return g, out[1]
        return g

    return grad_f


# ------------------------------------------------------------------ Jacobians

def _std_basis(leaves):
    """Identity matrices for a list of (float) leaves, flattened: shape (N, *leaf.shape) each."""
    from plax import lax
    sizes = [get_aval(x).size for x in leaves]
    n = sum(sizes)
    dt = dtypes.result_type(*[get_aval(x).dtype for x in leaves]) if leaves else np.float32
    # the identity matrix, from lax alone (transforms do not import plax.numpy)
    basis = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                            lax.broadcasted_iota(np.int32, (n, n), 1)), dt)
    out, start = [], 0
    for x, s in zip(leaves, sizes):
        block = lax.slice_in_dim(basis, start, start + s, 1, 1)
        out.append(lax.convert_element_type(lax.reshape(block, (n,) + get_aval(x).shape),
                                            get_aval(x).dtype))
        start += s
    return out, n


def _unstack_basis(x, axis: int, shapes: Sequence[tuple]) -> list:
    """Splits axis ``axis`` of ``x`` (one entry per element of a standard basis) into one piece
    per shape in ``shapes``, that axis replaced by the shape."""
    from plax import lax
    outer = get_aval(x).shape
    pieces, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        part = lax.slice_in_dim(x, start, start + size, 1, axis)
        pieces.append(lax.reshape(part, outer[:axis] + tuple(shape) + outer[axis + 1:]))
        start += size
    return pieces


def _cast_like(x, aval):
    """A Jacobian block with the dtype and weak type of ``aval``: JAX gives ``jacfwd`` blocks
    those of the output and ``jacrev`` blocks those of the input (a Python-scalar function
    has a weakly typed Jacobian)."""
    from plax import lax
    xa = get_aval(x)
    if xa.dtype == dtypes.float0:  # an integer output: its Jacobian is integer zeros
        return lax.full(xa.shape, 0, aval.dtype, weak_type=aval.weak_type)
    if dtypes.is_complex(xa.dtype) and not dtypes.is_complex(aval.dtype):
        x = lax.real(x)
    return lax.convert_element_type(x, aval.dtype, aval.weak_type)


def _rebuild_from_none(tree) -> None:
    """Unflattens ``tree``'s structure from ``None`` leaves, as JAX's jacobians do.

    JAX's ``jacfwd``/``jacrev`` check the arguments' and the outputs' dtypes with ``tree_map``,
    which rebuilds each tree from the checks' ``None`` results; a custom pytree whose
    unflatten rejects ``None`` (say, one calling ``jnp.array`` on its children) therefore
    fails there in JAX, with the class's own error (docs/custom_pytrees.md), and so here.
    """
    tree_util.tree_map(lambda _: None, tree)


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``fun`` by forward mode (one JVP per input element, vectorised with vmap).

    The result has, for each output leaf, shape ``out.shape + in.shape``.

    Example:
      >>> jax.jacfwd(lambda x: x ** 2)(jnp.array([1., 2.]))
      Array([[2., 0.],
             [0., 4.]], dtype=float32)
    """
    return _jacfwd(fun, argnums, has_aux, holomorphic, "jacfwd")


def _jacfwd(fun, argnums, has_aux, holomorphic, transform):
    from plax.transforms.vmap_api import vmap
    check_callable(fun, transform)
    single, nums = _normalize_argnums(argnums, transform)

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        pos = _resolve_argnums(nums, len(args), transform, argnums)
        dyn, partial_fun = _dynamic_args(fun, args, kwargs, pos, "jacfwd", holomorphic, False)
        _rebuild_from_none(dyn)
        d_leaves, d_tree = tree_util.tree_flatten(dyn)
        d_leaves = [_as_array(x) for x in d_leaves]

        def f_flat(*leaves):
            return partial_fun(*tree_util.tree_unflatten(d_tree, leaves))

        basis, n = _std_basis(d_leaves)
        out_avals: list = []

        def push(*tangent_leaves):
            res = _jvp(f_flat, tuple(d_leaves), tuple(tangent_leaves), has_aux,
                       DebugInfo(transform, fun, d_tree, pos))
            out_avals[:] = [get_aval(o) for o in tree_util.tree_leaves(res[0])]
            return (res[1], res[2]) if has_aux else res[1]

        stacked = vmap(push, out_axes=(-1, None) if has_aux else -1)(*basis)
        aux = None
        if has_aux:
            stacked, aux = stacked
        _rebuild_from_none(stacked)
        # stacked leaves: (*out_shape, N) -> split N into the input leaves' shapes
        out_leaves, out_tree = tree_util.tree_flatten(stacked)
        in_shapes = [get_aval(x).shape for x in d_leaves]
        per_out = []
        for o, o_aval in zip(out_leaves, out_avals):
            blocks = [_cast_like(b, o_aval)
                      for b in _unstack_basis(o, get_aval(o).ndim - 1, in_shapes)]
            per_out.append(tree_util.tree_unflatten(d_tree, blocks))
        jac = tree_util.tree_unflatten(out_tree, [p if not single else p[0] for p in per_out])
        return (jac, aux) if has_aux else jac

    return jacfun


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian of ``fun`` by reverse mode (one VJP per output element, vectorised with vmap).

    Example:
      >>> jax.jacrev(lambda x: x ** 2)(jnp.array([1., 2.]))
      Array([[2., 0.],
             [0., 4.]], dtype=float32)
    """
    return _jacrev(fun, argnums, has_aux, holomorphic, allow_int, "jacrev")


def _jacrev(fun, argnums, has_aux, holomorphic, allow_int, transform):
    from plax.transforms.vmap_api import vmap
    check_callable(fun, transform)
    single, nums = _normalize_argnums(argnums, transform)

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        pos = _resolve_argnums(nums, len(args), transform, argnums)
        dyn, partial_fun = _dynamic_args(fun, args, kwargs, pos, "jacrev", holomorphic,
                                         allow_int)
        _rebuild_from_none(dyn)
        debug = DebugInfo(transform, fun, argnums=pos)
        if has_aux:
            y, f_vjp, aux = _vjp(partial_fun, dyn, True, debug)
        else:
            y, f_vjp = _vjp(partial_fun, dyn, False, debug)
        _rebuild_from_none(y)
        y_leaves, y_tree = tree_util.tree_flatten(y)
        basis, n = _std_basis(y_leaves)
        pulled = vmap(lambda *b: f_vjp(tree_util.tree_unflatten(y_tree, list(b))))(*basis)
        # pulled: tuple over dyn args, each leaf (N, *in_shape) -> per output leaf (*out, *in)
        in_leaves, in_tree = tree_util.tree_flatten(pulled)
        out_shapes = [get_aval(o).shape for o in y_leaves]
        # each block takes its input's dtype and weak type, as JAX's jacrev casts them
        in_avals = [get_aval(a) for a in tree_util.tree_leaves(dyn)]
        pieces = [[_cast_like(p, a) for p in _unstack_basis(leaf, 0, out_shapes)]
                  for leaf, a in zip(in_leaves, in_avals)]
        per_out = []
        for k in range(len(y_leaves)):
            jac_o = tree_util.tree_unflatten(in_tree, [p[k] for p in pieces])
            per_out.append(jac_o[0] if single else jac_o)
        jac = tree_util.tree_unflatten(y_tree, per_out)
        return (jac, aux) if has_aux else jac

    return jacfun


jacobian = jacrev


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))``.

    Example:
      >>> jax.hessian(lambda x: x ** 3)(2.0)
      Array(12., dtype=float32, weak_type=True)
    """
    return _jacfwd(_jacrev(fun, argnums, has_aux, holomorphic, False, "hessian"), argnums,
                   has_aux, holomorphic, "hessian")

"""Forward mode: the JVP trace, symbolic zeros, and helpers to write JVP rules.

A JVP tracer carries a primal value and its tangent. A tangent may be a
symbolic :class:`Zero`, so inputs nobody differentiates cost nothing: a
primitive whose operands all have zero tangents just runs on the primals.
Integer and boolean values have ``float0`` tangents, as in JAX.

A JVP rule has the signature ``rule(primals, tangents, **params) ->
(primal_out, tangent_out)``; :func:`defjvp` builds one from per-operand
derivative functions.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes
from plax.core import registry
from plax.core.shaped_array import ShapedArray
from plax.array import Array
from plax.core.trace import Trace, Tracer, get_aval, staged_inputs

_jvp_rules = registry.rule_table("jvp")
#: primitives whose JVP rule runs even when every tangent is zero (``new_ref``: a ref made
#: under differentiation carries a tangent ref, for the differentiated values written later)
jvp_of_zeros: set = set()


def tangent_dtype(dtype: np.dtype) -> np.dtype:
    """float0 for integer and boolean dtypes, else the dtype itself."""
    return dtype if dtypes.is_inexact(dtype) else dtypes.float0


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The abstract value of a tangent of a value with abstract value ``aval``."""
    td = tangent_dtype(aval.dtype)
    if td is aval.dtype:
        return aval
    return ShapedArray(aval.shape, td, False, aval.vma)


class Zero:
    """A symbolic zero tangent (or cotangent) of abstract value ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal(x: Any) -> "Zero":
        return Zero(tangent_aval(get_aval(x)))

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"


def zeros_like_aval(aval: ShapedArray):
    """A concrete (or staged) array of zeros of ``aval``; float0 zeros are NumPy arrays, as in JAX."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    from plax import lax
    return lax.full(aval.shape, 0, aval.dtype, weak_type=aval.weak_type)


def instantiate(t: Any):
    """Replaces a symbolic zero by real zeros."""
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(a: Any, b: Any):
    """Sums two tangents, skipping symbolic zeros."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    from plax.lax.binary import add_any_p
    return add_any_p.bind(a, b)


def bilinear_jvp(prim) -> Callable:
    """The JVP rule of a primitive linear in each of its two operands (``dot_general``,
    ``conv_general_dilated``): ``d(f(l, r)) = f(dl, r) + f(l, dr)``, skipping zero tangents."""

    def rule(primals, tangents, **params):
        lhs, rhs = primals
        tl, tr = tangents
        out = prim.bind(lhs, rhs, **params)
        t_out = Zero.from_primal(out)
        if type(tl) is not Zero:
            t_out = add_tangents(t_out, prim.bind(tl, rhs, **params))
        if type(tr) is not Zero:
            t_out = add_tangents(t_out, prim.bind(lhs, tr, **params))
        return out, t_out

    return rule


def linear_in_first_jvp(prim) -> Callable:
    """The JVP rule of a primitive linear in its first operand whose other operands (if any)
    are indices or other non-differentiable values (``dynamic_slice``, a ref ``get``,
    ``freeze``): the tangent is the primitive applied to the first operand's tangent with the
    same other operands.

    Args:
      prim: the primitive.

    Returns:
      A rule ``(primals, tangents, **params) -> (out, tangent_out)`` for
      ``register_rule("jvp", prim)``; the tangent is a symbolic zero when the first operand's
      is.

    Example:
      >>> from plax.lax.slicing import dynamic_slice_p
      >>> rule = linear_in_first_jvp(dynamic_slice_p)  # (registered with register_rule)
      >>> rule((jnp.arange(4.0), jnp.int32(1)), (jnp.ones(4) * 10, None), slice_sizes=(2,))
      (Array([1., 2.], dtype=float32), Array([10., 10.], dtype=float32))
    """

    def rule(primals, tangents, **params):
        x, *rest = primals
        out = prim.bind(x, *rest, **params)
        t = tangents[0]
        if type(t) is Zero:
            return out, Zero.from_primal(out)
        return out, prim.bind(t, *rest, **params)

    return rule


class JVPTracer(Tracer):
    """A primal value with its tangent."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal: Any, tangent: Any):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def __repr__(self) -> str:
        # as JAX prints it: under reverse mode (a staged tangent) a GradTracer with the
        # tangent's type, under forward mode a JVPTracer with both values
        from plax.transforms.staging import is_linearize_tracer
        if is_linearize_tracer(self.tangent):
            return f"GradTracer(primal={self.primal}, typeof(tangent)=" \
                   f"{get_aval(self.tangent).str_short()})"
        return f"JVPTracer(primal={self.primal}, tangent={self.tangent})"

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p

    def _staged_inputs(self, in_tracers):
        # Reverse mode stages the tangents: the input tangents this tangent was computed from
        # are the inputs this value depends on.
        from plax.transforms.staging import JaxprTracer
        t = self.tangent
        if type(t) is not JaxprTracer:
            return None
        inputs = {x.tangent.jaxpr_var: i for i, x in enumerate(in_tracers)
                  if type(x) is JVPTracer and type(x.tangent) is JaxprTracer}
        return staged_inputs(t.jaxpr_var, t.builder.eqns, inputs) or None


def _committed_by_tangent(primal_out: Any, tangents: list, tangent_out: Any) -> Any:
    """``primal_out`` (an eager result of a primitive, ``tangent_out`` its tangent) committed
    to the device of the first of the ``tangents`` given that is an Array committed to one
    device there, as JAX 0.10 commits it: JAX runs each ``jax.numpy`` function as a ``jit``,
    whose device a committed tangent argument decides (``jvp(jnp.sin, (u,), (c,))``'s primal
    result is committed; JAX's ``lax.sin``, not a ``jit``, leaves it uncommitted, a
    difference plax keeps, both binding one primitive here). A result whose tangent is zero
    (the indices of ``argsort``'s sort) is left as it is: its ``jit``'s JVP does not take
    the tangent JAX's dead-code elimination drops. Each result of a primitive of several
    results (``eigvals``, ``unique``'s sort) is committed so, as one of a primitive of one."""
    if type(primal_out) is not Array or primal_out._committed or type(tangent_out) is Zero:
        return primal_out
    for t in tangents:
        if type(t) is Array and t._committed:
            if t._device is primal_out._device:
                return Array._new(primal_out._buf, primal_out.aval, t._device, True)
            break
    return primal_out


class JVPTrace(Trace):
    """Runs each primitive's JVP rule on (primal, tangent) pairs."""

    __slots__ = ()

    def pure(self, val: Any) -> JVPTracer:
        return JVPTracer(self, val, Zero.from_primal(val))

    lift = pure

    def process_primitive(self, primitive, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents) and primitive not in jvp_of_zeros:
            out = primitive.bind(*primals, **params)
            if primitive.multiple_results:
                return [JVPTracer(self, o, Zero.from_primal(o)) for o in out]
            return JVPTracer(self, out, Zero.from_primal(out))
        rule = _jvp_rules.get(primitive) or registry.get_rule("jvp", primitive)
        primal_out, tangent_out = rule(primals, tangents, **params)
        if primitive.multiple_results:
            primal_out = [_committed_by_tangent(p, tangents, t) for p, t in
                          zip(primal_out, tangent_out)]
            return [JVPTracer(self, p, t) for p, t in zip(primal_out, tangent_out)]
        primal_out = _committed_by_tangent(primal_out, tangents, tangent_out)
        return JVPTracer(self, primal_out, tangent_out)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            outs = primitive.bind_custom(fun, jvp, *primals, **params)
            return [JVPTracer(self, o, Zero.from_primal(o)) for o in outs]
        from plax.transforms.custom_derivatives import check_closed_tangents
        check_closed_tangents(tangents, params, "custom_jvp")
        if params.get("symbolic_zeros"):  # the rule gets None for a zero (a SymbolicZero)
            tangents = [None if type(t) is Zero else t for t in tangents]
        else:
            tangents = [instantiate(t) for t in tangents]
        outs = jvp(*primals, *tangents)
        primal_outs, tangent_outs = outs[:len(outs) // 2], outs[len(outs) // 2:]
        return [JVPTracer(self, p, t) for p, t in zip(primal_outs, tangent_outs)]

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            outs = primitive.bind_custom(fun, fwd, bwd, *primals, **params)
            return [JVPTracer(self, o, Zero.from_primal(o)) for o in outs]
        from plax.transforms.custom_derivatives import (_forward_mode_error,
                                                        check_closed_tangents, custom_lin_p)
        from plax.transforms.staging import is_linearize_tracer
        check_closed_tangents(tangents, params, "custom_vjp")
        sz = {}
        if params.get("symbolic_zeros"):  # the rule is told which inputs are perturbed
            sz = {"symbolic_zeros": True}
            primal_outs, residuals = fwd(*primals,
                                         perturbed=[type(t) is not Zero for t in tangents])
        else:
            primal_outs, residuals = fwd(*primals)
        # tangents pushed forward (jvp, jacfwd), not transposed: refused after the forward
        # rule ran, as in JAX (where the linear part's evaluation refuses them)
        if not all(type(t) is Zero or is_linearize_tracer(t) for t in tangents):
            _forward_mode_error()
        tangents = [instantiate(t) for t in tangents]
        out_avals = tuple(tangent_aval(get_aval(p)) for p in primal_outs)
        tangent_outs = custom_lin_p.bind(*residuals, *tangents, num_res=len(residuals),
                                         bwd=bwd, out_avals=out_avals, **sz)
        return [JVPTracer(self, p, t) for p, t in zip(primal_outs, tangent_outs)]


# ------------------------------------------------------------------ rule helpers

def _fit_to(t: Any, aval: ShapedArray):
    """Broadcasts a tangent contribution to the output's shape (from rank 0, or along the
    size-1 axes of an operand that an elementwise primitive broadcast)."""
    if get_aval(t).shape != aval.shape:
        from plax.lax.shape import broadcast_size_one
        t = broadcast_size_one(t, aval.shape)
    return t


def defjvp(primitive, *derivatives: Callable | None) -> None:
    """Registers a JVP rule from one derivative function per operand.

    Each ``derivative(t, *primals, **params)`` returns the contribution of tangent
    ``t`` of its operand to the output tangent (``None`` for operands that are
    not differentiable). Contributions are summed; zero tangents are skipped.

    Example:
      >>> my_sin_p = plax.core.Primitive("my_sin")
      >>> _ = my_sin_p.def_abstract_eval(lambda x: x)
      >>> defjvp(my_sin_p, lambda t, x: lax.mul(t, lax.cos(x)))
      >>> plax.make_jaxpr(lambda x: plax.jvp(my_sin_p.bind, (x,), (1.0,)))(0.5)
      { lambda ; a:f32[]. let
          b:f32[] = my_sin a
          c:f32[] = cos a
          d:f32[] = mul 1.0:f32[] c
        in (b, d) }
    """
    _register_summed_jvp(primitive, derivatives, pass_output=False)


def defjvp2(primitive, *derivatives: Callable | None) -> None:
    """Like :func:`defjvp`, but each derivative also receives the output:
    ``derivative(t, out, *primals, **params)`` (e.g. ``exp``'s tangent is ``t * out``)."""
    _register_summed_jvp(primitive, derivatives, pass_output=True)


def _register_summed_jvp(primitive, derivatives, pass_output: bool) -> None:
    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        aval = tangent_aval(get_aval(out))
        leading = (out,) if pass_output else ()
        total = Zero(aval)
        for deriv, t in zip(derivatives, tangents):
            if deriv is None or type(t) is Zero:
                continue
            total = add_tangents(total, _fit_to(deriv(t, *leading, *primals, **params), aval))
        return out, total

    registry.register_rule("jvp", primitive)(rule)


def defzero(primitive) -> None:
    """Registers the JVP of a piecewise-constant primitive (sign, floor, comparisons, ...)."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [Zero.from_primal(o) for o in out]
        return out, Zero.from_primal(out)

    registry.register_rule("jvp", primitive)(rule)


def deflinear(primitive, transpose_rule: Callable) -> None:
    """Registers the JVP and transpose rules of a primitive linear in all its operands.

    The JVP applies the primitive to the tangents (zeros instantiated only when
    some operand has a real tangent); ``transpose_rule(ct, *operands, **params)``
    returns one cotangent per operand.
    """

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        tangents = [instantiate(t) for t in tangents]
        return out, primitive.bind(*tangents, **params)

    registry.register_rule("jvp", primitive)(rule)
    registry.register_rule("transpose", primitive)(transpose_rule)


# ------------------------------------------------------------------ the jvp API

def jvp_flat(fun: Callable, primals: list, tangents: list, debug=None) -> tuple[list, list]:
    """``(outputs, output tangents)`` of flat ``fun`` at ``primals`` along ``tangents``.

    ``debug`` (a :class:`plax.core.trace.DebugInfo`) names the user's function and its
    arguments in conversion errors.
    """
    from plax.core.trace import new_main
    with new_main(JVPTrace, debug=debug) as main:
        trace = JVPTrace(main)
        tracers = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        if debug is not None:
            debug.in_tracers = tracers
        outs = fun(*tracers)
        from plax.transforms.staging import check_output
        for o in outs:
            check_output(o, "the differentiated function")
        out_tracers = [trace.full_raise(o) for o in outs]
        return [t.primal for t in out_tracers], [t.tangent for t in out_tracers]

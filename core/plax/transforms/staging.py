"""Staging: the trace that records primitives into a Jaxpr instead of running them.

``jit`` and ``make_jaxpr`` install it as the *dynamic* trace, so even operations
on constants (``jnp.ones(3)``) are recorded; reverse mode installs it without
that flag to collect only the tangent (linear) part of a JVP (and, as the
dynamic trace, to stage the JVP of a ``jit`` call's body). Values from
outside the trace (arrays, or tracers of lower transforms) become constants:
host scalars are written inline as literals, the rest (Arrays of any rank) become
constvars, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plax import dtypes
from plax.core import varying as _varying
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from plax.core.source_info import capturing as _source_capturing
from plax.core.shaped_array import ShapedArray
from plax.core.trace import DebugInfo, Trace, Tracer, get_aval, new_main, staged_inputs
from plax.sharding_types import casting as _casting, casts_in_progress as _casts, typed_result
from plax.state.types import Ref


class JaxprTracer(Tracer):
    """A value in a jaxpr being built: it knows only its abstract value, its variable and the
    builder (the jaxpr under construction) that defines that variable."""

    __slots__ = ("_aval", "jaxpr_var", "builder")

    def __init__(self, trace: "JaxprTrace", aval: ShapedArray, var: Var, builder: "JaxprBuilder"):
        self._trace = trace
        self._aval = aval
        self.jaxpr_var = var   # (not `var`: that is the array method, x.var())
        self.builder = builder

    @property
    def aval(self):
        return self._aval

    def __repr__(self) -> str:
        return f"JitTracer({self._aval})"  # as JAX prints a staged value: JitTracer(~float32[])

    def _staged_inputs(self, in_tracers):
        # The inputs of the jaxpr being built that this value was computed from: walk the
        # recorded equations back from its variable (names the argument in conversion errors).
        inputs = {t.jaxpr_var: i for i, t in enumerate(in_tracers)
                  if isinstance(t, JaxprTracer) and t.builder is self.builder}
        return staged_inputs(self.jaxpr_var, self.builder.eqns, inputs) or None


class JaxprBuilder:
    """The equations, constants and variables recorded by one staging trace."""

    def __init__(self) -> None:
        self.eqns: list[JaxprEqn] = []
        self.const_tracers: dict[int, JaxprTracer] = {}
        self.const_vals: dict[Var, Any] = {}
        self._keepalive: list = []  # constants are keyed by id(); keep them alive while building

    def add_const(self, trace: "JaxprTrace", val: Any) -> JaxprTracer:
        tracer = self.const_tracers.get(id(val))
        if tracer is None:
            aval = get_aval(val)
            var = Var(aval)
            tracer = JaxprTracer(trace, aval, var, self)
            self.const_tracers[id(val)] = tracer
            self.const_vals[var] = val
            self._keepalive.append(val)
        return tracer

    def build(self, in_tracers: Sequence[JaxprTracer], out_tracers: Sequence[JaxprTracer]
              ) -> tuple[Jaxpr, list]:
        """The finished jaxpr (rank-0 constants inlined as literals) and its constant values."""
        literals: dict[Var, Literal] = {}
        for var, val in self.const_vals.items():
            lit = _as_literal(val, var.aval)
            if lit is not None:
                literals[var] = lit

        def sub(v):
            return literals.get(v, v) if isinstance(v, Var) else v

        eqns = [JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars, e.params)
                for e in self.eqns]
        used = {v for e in eqns for v in e.invars if isinstance(v, Var)}
        outvars = [sub(t.jaxpr_var) for t in out_tracers]
        used.update(v for v in outvars if isinstance(v, Var))
        constvars = [v for v in self.const_vals if v not in literals and v in used]
        jaxpr = Jaxpr(constvars, [t.jaxpr_var for t in in_tracers], outvars, eqns)
        return jaxpr, [self.const_vals[v] for v in constvars]


def _as_literal(val: Any, aval: ShapedArray) -> Literal | None:
    """A Literal for a rank-0 host constant, or None: it stays a constvar.

    JAX 0.10's rule: Python and NumPy scalars (and rank-0 NumPy arrays) are written inline;
    a ``jax.Array`` is a constvar whatever its rank, since it lives on a device. An Array
    made while tracing (``jnp.array(2.0)`` inside the function) whose value is still on the
    host is JAX's host constant, so it is inlined too."""
    from plax.array import _PROMOTED, _PendingArray
    if aval.shape != () or aval.dtype == dtypes.float0:
        return None
    if type(val) is _PendingArray:
        host = val._pending_host()
        if host is None or host is _PROMOTED:
            return None
        return Literal(np.asarray(host, aval.dtype).reshape(()).copy()[()], aval)
    if isinstance(val, dtypes.HOST_VALUE_TYPES):
        return Literal(np.asarray(val, aval.dtype)[()], aval)
    return None


class JaxprTrace(Trace):
    """Records each primitive as an equation of the builder in ``main.payload``.

    The payload is the builder of the jaxpr being written now; :meth:`trace_subjaxpr`
    swaps in a fresh one to record a sub-jaxpr (the body of a custom_jvp/custom_vjp call)
    at the *same* level, so transforms between this trace and the caller (a vmap inside a
    jit) keep their order. A tracer of an enclosing builder met inside a sub-jaxpr is a
    value from outside it: it becomes one of its constants, then an explicit operand.
    """

    __slots__ = ()

    @property
    def builder(self) -> JaxprBuilder:
        return self.main.payload

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        return JaxprTracer(self, aval, Var(aval), self.main.payload)

    def pure(self, val: Any) -> JaxprTracer:
        # Host values stay on the host: scalars become literals, arrays constants that a
        # compiled function puts on its device once.
        from plax.array import trace_constant
        if not isinstance(val, (Tracer, Ref)):
            val = trace_constant(val)
        return self.builder.add_const(self, val)

    lift = pure

    def full_raise(self, val: Any) -> Tracer:
        if type(val) is JaxprTracer and val._trace.main is self.main:
            builder = self.main.payload
            return val if val.builder is builder else builder.add_const(self, val)
        return super().full_raise(val)

    def process_primitive(self, primitive, tracers, params):
        in_avals = [t.aval for t in tracers]
        avals_out = primitive.abstract_eval(*in_avals, **params)
        if _varying.current() is not None:  # in shard_map(check_vma=True): varying axes
            vma = _varying.result_vma(primitive, in_avals)
            if vma is not None:
                avals_out = ([a.update(vma=vma) for a in avals_out]
                             if primitive.multiple_results else avals_out.update(vma=vma))
            avals_out = _varying.type_unreduced(primitive, in_avals, params, avals_out)
        # explicit sharding in types: a sharded operand, or a cast being staged
        if (_casts[0] and _casting()) or \
                any(getattr(a, "sharding", None) is not None for a in in_avals):
            avals_out = typed_result(primitive, in_avals, params, avals_out)
        if primitive.multiple_results:
            outs = [self.new_arg(a) for a in avals_out]
        else:
            outs = [self.new_arg(avals_out)]
        self.builder.eqns.append(JaxprEqn(primitive, [t.jaxpr_var for t in tracers],
                                          [o.jaxpr_var for o in outs], params))
        if _source_capturing[0]:  # print_saved_residuals asks where values come from
            from plax.core import source_info
            source_info.record([o.jaxpr_var for o in outs])
        return outs if primitive.multiple_results else outs[0]

    def trace_subjaxpr(self, fun: Callable, in_avals: Sequence[ShapedArray],
                       hoist: bool = False) -> tuple[ClosedJaxpr, list]:
        """Records ``fun`` as a separate jaxpr at this trace's level.

        Args:
          hoist: capture the arrays ``fun`` closed over too (as JAX does for the function
            of a custom_jvp/custom_vjp call: its jaxpr then holds no constants).

        Returns:
          ``(closed, captured)``: ``closed`` takes the captured values first, then the
          inputs; ``captured`` are the tracers ``fun`` closed over (outer-builder tracers and
          tracers of lower transforms), and with ``hoist`` its constants, to pass as the
          call's leading operands.
        """
        main = self.main
        outer = main.payload
        main.payload = JaxprBuilder()
        try:
            sub = JaxprTrace(main)
            in_tracers = [sub.new_arg(a) for a in in_avals]
            outs = fun(*in_tracers)
            out_tracers = [sub.full_raise(o) for o in outs]
            jaxpr, consts = main.payload.build(in_tracers, out_tracers)
        finally:
            main.payload = outer
        if hoist:
            return (ClosedJaxpr(Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars),
                                      jaxpr.outvars, jaxpr.eqns), []), list(consts))
        return convert_tracer_consts(jaxpr, consts)

    def _stage_custom_call(self, primitive, fun, tracers, rules: dict, params: dict):
        closed, captured = self.trace_subjaxpr(fun, [t.aval for t in tracers], hoist=True)
        operands = [self.full_raise(c) for c in captured] + list(tracers)
        params = dict(params, call_jaxpr=closed, num_consts=len(captured), **rules)
        return self.process_primitive(primitive, operands, params)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        return self._stage_custom_call(primitive, fun, tracers, dict(jvp=jvp), params)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        return self._stage_custom_call(primitive, fun, tracers, dict(fwd=fwd, bwd=bwd), params)


class LinearizeTrace(JaxprTrace):
    """The staging trace of reverse mode: records the tangent (linear) part of a JVP.

    A separate class so that rules can tell reverse mode from forward mode: a custom_vjp
    function accepts tangents only from this trace (they are transposed, never evaluated).
    """

    __slots__ = ()


def is_linearize_tracer(x: Any) -> bool:
    """Whether ``x`` is a tangent being staged for transposition (reverse mode)."""
    return type(x) is JaxprTracer and x._trace.main.trace_type is LinearizeTrace


def convert_tracer_consts(jaxpr: Jaxpr, consts: Sequence[Any], move_refs: bool = True
                          ) -> tuple[ClosedJaxpr, list]:
    """Turns the constvars of ``jaxpr`` whose values are tracers into leading invars.

    A sub-jaxpr must not hold tracers as constants: they belong to a trace that may be
    gone when the jaxpr is evaluated. Nor, with ``move_refs``, mutable array references: a
    body that closes over a ref takes it as an operand, as in JAX. Returns the ClosedJaxpr
    over the concrete constants and the values to pass as leading arguments.
    """
    keep_vars, keep_vals, moved_vars, moved_vals = [], [], [], []
    for v, c in zip(jaxpr.constvars, consts):
        if isinstance(c, Tracer) or (move_refs and type(c) is Ref):
            moved_vars.append(v)
            moved_vals.append(c)
        else:
            keep_vars.append(v)
            keep_vals.append(c)
    new = Jaxpr(keep_vars, moved_vars + list(jaxpr.invars), jaxpr.outvars, jaxpr.eqns)
    return ClosedJaxpr(new, keep_vals), moved_vals


def check_output(x: Any, where: str) -> None:
    """Raises TypeError for a function output that is not an array or scalar (JAX's
    ValueError for an object with ``__jax_array__``)."""
    from plax.array import ARRAYLIKE_TYPES
    if isinstance(x, ARRAYLIKE_TYPES):
        return
    from plax.errors import jax_array_operand
    refused = jax_array_operand(x)  # JAX 0.10 reads no __jax_array__ of an output either
    if refused is not None:
        raise refused
    raise TypeError(f"Value {x!r} of type {type(x).__name__} returned by {where} is not a valid "
                    "JAX type: outputs must be arrays or scalars (in any pytree).")


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray], where: str = "the function",
                   debug: DebugInfo | None = None, trace_type: type = None,
                   ) -> tuple[ClosedJaxpr, Any]:
    """Traces ``fun(*flat_args) -> flat outputs`` on abstract inputs into a ClosedJaxpr.

    Args:
      fun: takes one tracer per aval and returns a list/tuple of outputs.
      in_avals: the abstract values of the inputs.
      where: how to name the function in error messages.
      debug: names the transform, the user's function and its arguments in conversion
        errors (its ``in_tracers`` are set to the input tracers).
      trace_type: the staging trace class (default :class:`JaxprTrace`; reverse mode stages
        a call's JVP with :class:`LinearizeTrace`).

    Returns:
      ``(closed_jaxpr, raw_outputs)``, the second being whatever ``fun`` returned. Values
      of enclosing transforms that ``fun`` closed over are constants of the result (see
      :func:`convert_tracer_consts`).
    """
    trace_type = trace_type or JaxprTrace
    with new_main(trace_type, dynamic=True, payload=JaxprBuilder(), debug=debug) as main:
        trace = trace_type(main)
        in_tracers = [trace.new_arg(a) for a in in_avals]
        if debug is not None:
            debug.in_tracers = in_tracers
        outs = fun(*in_tracers)
        for o in outs:
            check_output(o, where)
        out_tracers = [trace.full_raise(o) for o in outs]
        jaxpr, consts = main.payload.build(in_tracers, out_tracers)
    return ClosedJaxpr(jaxpr, consts), outs


def abstractify(x: Any) -> ShapedArray:
    """The ShapedArray of a jit/make_jaxpr argument (arrays, scalars, ShapeDtypeStructs)."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.ndarray, np.generic)):
        from plax.sharding_types import explicit_sharding  # a ShapeDtypeStruct's sharding
        return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype),
                           bool(getattr(x, "weak_type", False)), sharding=explicit_sharding(x))
    if isinstance(x, dtypes.HOST_VALUE_TYPES):
        dt, weak = dtypes.dtype_and_weak_type(x)
        return ShapedArray(np.shape(x), dt, weak)
    raise TypeError(f"Argument {x!r} of type {type(x).__name__} is not a valid JAX type: "
                    "arguments must be arrays, scalars or pytrees of them. Mark non-array "
                    "arguments static (static_argnums / static_argnames).")

"""Traces and tracers: how a transform intercepts primitives.

A transform is an interpreter. Entering one pushes a :class:`MainTrace` onto the
trace stack; its values are wrapped in :class:`Tracer` objects of that trace.
Binding a primitive finds the *top* trace among the operands (the highest level
wins), raises every operand into it, and hands the primitive to that trace's
``process_primitive``. The trace computes with the unwrapped values by binding
primitives again, which reach the traces below. Levels are what keep nested
transforms apart: ``grad(grad(f))`` runs two JVP traces at two levels, and a
value of the outer one is a constant to the inner one (no perturbation
confusion).

A trace can also be *dynamic* (jit and make_jaxpr install one): primitives
applied to plain constants are then staged into it instead of running eagerly.

When no transform is active (``state.depth == 0``) ``Primitive.bind`` skips all
of this and calls the eager dispatcher directly.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from plax import errors


class MainTrace:
    """One active transform: its level on the stack, its Trace class, and its data."""

    __slots__ = ("level", "trace_type", "payload", "active")

    def __init__(self, level: int, trace_type: type, payload: Any = None):
        self.level = level
        self.trace_type = trace_type
        self.payload = payload
        self.active = True

    def with_cur_trace(self) -> "Trace":
        return self.trace_type(self)

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class TraceState:
    """The trace stack. ``depth`` is the number of active transforms (0: pure eager)."""

    __slots__ = ("stack", "dynamic", "depth", "eval_primitive")

    def __init__(self):
        self.stack: list[MainTrace] = []
        self.dynamic: MainTrace | None = None
        self.depth = 0
        # Set by plax.dispatch: the eager path of Primitive.bind.
        self.eval_primitive: Callable = _no_dispatcher


def _no_dispatcher(prim, args, params):
    raise RuntimeError("plax.dispatch has not been imported; import plax first.")


state = TraceState()


class Trace:
    """The interpreter of one transform at one level. Subclasses override the ``process_*`` methods."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, val: Any) -> "Tracer":
        """Wraps a value that is not a tracer of this transform (a constant to it)."""
        raise NotImplementedError

    def lift(self, tracer: "Tracer") -> "Tracer":
        """Wraps a tracer of a lower-level transform."""
        return self.pure(tracer)

    def full_raise(self, val: Any) -> "Tracer":
        if not isinstance(val, Tracer):
            return self.pure(val)
        main = val._trace.main
        if main is self.main:
            return val
        if not main.active:
            raise errors.UnexpectedTracerError(f"Encountered an unexpected tracer: {val}.")
        if main.level < self.main.level:
            return self.lift(val)
        raise errors.UnexpectedTracerError(
            f"Tracer {val} from a transform at level {main.level} reached a transform at level "
            f"{self.main.level}, below it.")

    def process_primitive(self, primitive, tracers, params):
        raise NotImplementedError

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        """How this transform treats a function with a custom JVP rule (see plax.custom_derivatives)."""
        raise NotImplementedError(f"{type(self).__name__} does not support custom_jvp functions.")

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        """How this transform treats a function with a custom VJP rule (see plax.custom_derivatives)."""
        raise NotImplementedError(f"{type(self).__name__} does not support custom_vjp functions.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(level={self.main.level})"


class EvalTrace(Trace):
    """Level 0: run primitives now, on concrete values."""

    __slots__ = ()

    def pure(self, val):
        return val

    lift = pure

    def process_primitive(self, primitive, tracers, params):
        return state.eval_primitive(primitive, tracers, params)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        return fun(*tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        return fun(*tracers)


_base_main = MainTrace(0, EvalTrace)
state.stack.append(_base_main)
state.dynamic = _base_main


class Tracer:
    """A value being traced by one transform. Array methods are shared with :class:`plax.Array`.

    Subclasses define ``aval`` (a ShapedArray) and may define ``to_concrete_value``
    when the value is known (a JVP tracer of a concrete primal is), so Python
    control flow keeps working under ``grad``.
    """

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self):
        raise NotImplementedError

    def to_concrete_value(self):
        """The concrete value this tracer stands for, or None if it is abstract."""
        return None

    def full_lower(self):
        return self

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self) -> int:
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def _concrete(self, error):
        val = self.to_concrete_value()
        if val is None:
            raise error(self)
        return val

    def __bool__(self) -> bool:
        return bool(self._concrete(errors.TracerBoolConversionError))

    def __int__(self) -> int:
        return int(self._concrete(errors.ConcretizationTypeError))

    def __float__(self) -> float:
        return float(self._concrete(errors.ConcretizationTypeError))

    def __complex__(self) -> complex:
        return complex(self._concrete(errors.ConcretizationTypeError))

    def __index__(self) -> int:
        return self._concrete(errors.TracerIntegerConversionError).__index__()

    def __array__(self, dtype=None, copy=None):
        val = self.to_concrete_value()
        if val is None:
            raise errors.TracerArrayConversionError(self)
        import numpy as np
        return np.asarray(val, dtype=dtype)

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__} ({self}). Arrays and tracers are "
                        "not hashable; to use one as a static jit argument, pass a tuple or a "
                        "Python scalar instead.")

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.aval.shape[0]))

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"

    def __setitem__(self, idx, value):
        raise TypeError(f"{type(self).__name__!r} object does not support item assignment. JAX "
                        "arrays are immutable. Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)`` "
                        "or another .at[] method.")


@contextlib.contextmanager
def new_main(trace_type: type, dynamic: bool = False, payload: Any = None) -> Iterator[MainTrace]:
    """Pushes a new transform onto the trace stack for the duration of a ``with`` block.

    Args:
      trace_type: the Trace subclass that interprets primitives at the new level.
      dynamic: stage primitives on constants into this trace too (jit, make_jaxpr).
      payload: transform-specific data (e.g. vmap's axis size and name).

    Yields:
      The new MainTrace.
    """
    stack = state.stack
    main = MainTrace(len(stack), trace_type, payload)
    stack.append(main)
    state.depth += 1
    prev_dynamic = state.dynamic
    if dynamic:
        state.dynamic = main
    try:
        yield main
    finally:
        state.dynamic = prev_dynamic
        stack.pop()
        state.depth -= 1
        main.active = False


@contextlib.contextmanager
def eager_region() -> Iterator[None]:
    """Runs the body with no active transform (for work that must happen eagerly, e.g. compiling)."""
    saved = (state.stack, state.dynamic, state.depth)
    state.stack, state.dynamic, state.depth = [_base_main], _base_main, 0
    try:
        yield
    finally:
        state.stack, state.dynamic, state.depth = saved


def find_top_trace(args) -> Trace:
    """The trace that must process a primitive applied to ``args``: the highest level present."""
    top = state.dynamic
    for x in args:
        if isinstance(x, Tracer):
            main = x._trace.main
            if main.level > top.level:
                top = main
            if not main.active:
                raise errors.UnexpectedTracerError(
                    f"Encountered an unexpected tracer: {x}, created by a transform that has "
                    "already finished.")
    return top.trace_type(top)


def full_lower(val):
    return val.full_lower() if isinstance(val, Tracer) else val


def bind_with_trace(primitive, args, params):
    """Binds ``primitive`` on the top trace among ``args`` (the slow path of ``bind``)."""
    trace = find_top_trace(args)
    tracers = [trace.full_raise(a) for a in args]
    out = trace.process_primitive(primitive, tracers, params)
    if primitive.multiple_results:
        return [full_lower(o) for o in out]
    return full_lower(out)


def is_tracer(x: Any) -> bool:
    return isinstance(x, Tracer)


def get_aval(x: Any):
    """The ShapedArray of an array, tracer or scalar."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval
    from plax.core.shaped_array import ShapedArray
    from plax import dtypes
    import numpy as np
    dt, weak = dtypes.dtype_and_weak_type(x)
    return ShapedArray(np.shape(x), dt, weak)

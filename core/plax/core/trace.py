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

The trace state is per thread, as JAX's trace context is: two threads tracing (the same
jitted function, say) at once each have their own stack, and a tracer of one never reaches
the other. What all threads share (the eager evaluator, and a count of the transforms
active in any thread, which lets ``bind`` skip the thread-local lookup when nothing is
traced anywhere) lives in :data:`shared`.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

from plax import errors


class MainTrace:
    """One active transform: its level on the stack, its Trace class, its data, and what it
    traces (a :class:`DebugInfo`, or None) for error messages."""

    __slots__ = ("level", "trace_type", "payload", "active", "debug")

    def __init__(self, level: int, trace_type: type, payload: Any = None,
                 debug: "DebugInfo | None" = None):
        self.level = level
        self.trace_type = trace_type
        self.payload = payload
        self.active = True
        self.debug = debug

    def with_cur_trace(self) -> "Trace":
        return self.trace_type(self)

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class SharedState:
    """What every thread shares: the eager evaluator (``eval_primitive``, set by
    :mod:`plax.dispatch`) and ``active``, the number of transforms active over all threads.
    ``active == 0`` means no thread traces: ``bind`` then evaluates eagerly without reading
    the thread-local :data:`state` (one attribute read instead of a thread-local lookup)."""

    __slots__ = ("eval_primitive", "active", "lock")

    def __init__(self):
        self.eval_primitive: Callable = _no_dispatcher
        self.active = 0
        self.lock = threading.Lock()  # guards ``active`` (``+=`` is not atomic across threads)


def _no_dispatcher(prim, args, params):
    raise RuntimeError("plax.dispatch has not been imported; import plax first.")


shared = SharedState()


class TraceState(threading.local):
    """The trace stack of the running thread. ``depth`` is the number of active transforms
    (0: pure eager). Each thread starts with only the eager level (JAX's trace context is
    thread-local too): a thread started while another traces does not see its transforms."""

    def __init__(self):
        self.stack: list[MainTrace] = [_base_main]
        self.dynamic: MainTrace = _base_main
        self.depth = 0
        # active levels that bind names primitives refer to (see Trace.binds_names): only
        # then may an application belong above its operands (see bind_with_trace)
        self.naming_levels = 0
        # the varying-axes typing stack of plax.core.varying (None: untyped)
        self.vma: list = [None]


class Trace:
    """The interpreter of one transform at one level. Subclasses override the ``process_*`` methods."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    @staticmethod
    def binds_names(payload: Any) -> bool:
        """Whether a level of this transform with ``payload`` binds names that primitives
        refer to (``vmap(axis_name="i")`` binds ``"i"`` for ``psum``): such a level may
        have to process an application none of whose operands belongs to it (see
        :func:`register_level_rule`)."""
        return False

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
        return shared.eval_primitive(primitive, tracers, params)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        return fun(*tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        return fun(*tracers)


_base_main = MainTrace(0, EvalTrace)  # level 0 of every thread's stack
state = TraceState()


class Tracer:
    """A value being traced by one transform. Array methods are shared with :class:`plax.Array`.

    Subclasses define ``aval`` (a ShapedArray) and may define ``to_concrete_value``
    when the value is known (a JVP tracer of a concrete primal is), so Python
    control flow (``bool``, ``int``, indexing) keeps working under ``grad``. ``float``,
    ``complex`` and NumPy conversions raise under every transform, naming the function
    and argument (see :func:`tracer_origin`).
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

    def _staged_inputs(self, in_tracers) -> list[int] | None:
        """Indices of the ``in_tracers`` this value was computed from, when the trace records
        it (reverse mode stages its tangents); None when it is not known."""
        return None

    def _conversion_error(self, error: type, context: str | None = None) -> Exception:
        """``error`` for this tracer, saying which function and argument it comes from."""
        origin = tracer_origin(self)
        if context is not None:  # ConcretizationTypeError takes extra text; the others do not
            return error(self, "\n".join(filter(None, [context, origin])))
        err = error(self)
        if origin:
            err.args = (f"{err.args[0]}\n{origin}",)
        return err

    # Python conversions. JAX reads the value of a tracer only where the result cannot carry a
    # derivative anyway (bool, int, index: piecewise constant) and the value is known (a JVP
    # tracer of a concrete primal), so Python control flow keeps working under grad. A float,
    # a complex or a NumPy array would silently drop the derivative: those always raise.
    def __bool__(self) -> bool:
        val = self.to_concrete_value()
        if val is None:
            raise self._conversion_error(errors.TracerBoolConversionError)
        return bool(val)

    def __int__(self) -> int:
        val = self.to_concrete_value()
        if val is None:
            raise self._conversion_error(errors.ConcretizationTypeError, _cast_context("int"))
        return int(val)

    def __index__(self) -> int:
        aval = self.aval
        if aval.shape or aval.dtype.kind not in "iu":  # checked on the type, before the value
            raise TypeError(f"Only integer scalar arrays can be converted to a scalar index; got "
                            f"a traced array of type {aval.str_short()}.")
        val = self.to_concrete_value()
        if val is None:
            raise self._conversion_error(errors.TracerIntegerConversionError)
        return val.__index__()

    def __float__(self) -> float:
        raise self._conversion_error(errors.ConcretizationTypeError, _cast_context("float"))

    def __complex__(self) -> complex:
        raise self._conversion_error(errors.ConcretizationTypeError, _cast_context("complex"))

    def __array__(self, dtype=None, copy=None):
        raise self._conversion_error(errors.TracerArrayConversionError)

    def tolist(self):
        raise self._conversion_error(errors.ConcretizationTypeError, (
            "The problem arose with the `tolist` method: a traced value has no Python list."))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # plax.numpy installs the array methods on Tracer, ``item`` among them (read through
        # NumPy, so a tracer would report an array conversion); each tracer class keeps this
        # one, which reads a known value and otherwise raises JAX's ConcretizationTypeError.
        if "item" not in cls.__dict__:
            cls.item = Tracer._concrete_item

    def _concrete_item(self, *args):
        """``item()`` of a tracer: the value when it is known (under grad), else an error."""
        val = self.to_concrete_value()
        if val is None:
            raise self._conversion_error(errors.ConcretizationTypeError, (
                "The problem arose with the `item` method: a traced value has no Python "
                "scalar value."))
        import numpy as np
        return np.asarray(val).item(*args)

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
        if type(self.aval).__name__ == "AbstractRef":  # a traced ref (plax.state): a write
            from plax.state.primitives import ref_set
            return ref_set(self, idx, value)
        raise TypeError("JAX arrays are immutable and do not support in-place item assignment. "
                        "Instead of x[idx] = y, use x = x.at[idx].set(y) or another .at[] "
                        "method: "
                        "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")


def _cast_context(fn: str) -> str:
    return (f"The problem arose with the `{fn}` function. To change the dtype of a traced value "
            f"use `x.astype({fn})` or `jnp.asarray(x, {fn})`; a Python {fn} cannot be computed "
            "from a traced value.")


class DebugInfo:
    """What a transform is tracing, for error messages: the API's name (``"grad"``), the
    user's function, and how its arguments were flattened into the traced inputs.

    Args:
      transform: the name of the transform as the user called it.
      fun: the user's function (argument names come from its signature).
      in_tree: the treedef of the traced positional arguments (a tuple), or of
        ``(args, kwargs)`` when ``kwargs`` is true; may be set after construction.
      argnums: the position in ``fun``'s signature of each traced positional argument
        (None: ``0, 1, ...``).

    The transform stores its input tracers in ``in_tracers`` (one per flat input). Names are
    worked out only when an error needs them, so a transform pays for one small object.
    """

    __slots__ = ("transform", "fun", "in_tree", "argnums", "kwargs", "in_tracers")

    def __init__(self, transform: str, fun: Callable, in_tree: Any = None,
                 argnums: Sequence[int] | None = None, kwargs: bool = False):
        self.transform = transform
        self.fun = fun
        self.in_tree = in_tree
        self.argnums = argnums
        self.kwargs = kwargs
        self.in_tracers: Sequence[Any] = ()

    @property
    def func_name(self) -> str:
        return fun_name(self.fun)

    def arg_names(self) -> list[str]:
        """One name per flat input, written as in Python: ``x``, ``params['w']``, ``args[2]``."""
        import inspect
        from plax import tree_util
        tree = tree_util.tree_unflatten(self.in_tree, list(range(self.in_tree.num_leaves)))
        if not self.kwargs:
            tree = (tree, {})
        try:
            params = list(inspect.signature(self.fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
        star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
        names = [""] * self.in_tree.num_leaves
        for path, i in tree_util.tree_flatten_with_path(tree)[0]:
            group, key, rest = path[0].idx, path[1], tree_util.keystr(tuple(path[2:]))
            if group == 1:  # a keyword argument
                names[i] = f"{key.key}{rest}"
                continue
            pos = key.idx if self.argnums is None else self.argnums[key.idx]
            if pos < len(positional):
                names[i] = positional[pos] + rest
            elif star is not None:
                names[i] = f"{star}[{pos - len(positional)}]{rest}"
            else:
                names[i] = f"args[{pos}]{rest}"
        return names


def fun_name(fun: Any) -> str:
    """A function's name for messages (that of the wrapped function for a partial)."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    return getattr(fun, "__name__", None) or type(fun).__name__


def tracer_origin(tracer: Tracer) -> str:
    """A sentence naming the function being transformed and the arguments ``tracer`` was
    computed from, or '' when the transform recorded nothing (e.g. jit)."""
    debug = tracer._trace.main.debug
    if debug is None or debug.in_tree is None:
        return ""
    try:  # an error message must not fail itself
        names = debug.arg_names()
        ins = debug.in_tracers
        deps = [i for i, t in enumerate(ins) if t is tracer] or tracer._staged_inputs(ins)
        exact = bool(deps)
        if not deps:  # some of the traced arguments: name them all
            main = tracer._trace.main
            deps = [i for i, t in enumerate(ins)
                    if isinstance(t, Tracer) and t._trace.main is main]
            exact = len(deps) == 1
        which = [names[i] for i in deps]
    except Exception:  # noqa: BLE001
        return f"The error occurred while tracing the function {debug.func_name} for " \
               f"{debug.transform}."
    if not which:
        why = ""
    elif exact:
        why = (f" This concrete value was not available in Python because it depends on the "
               f"value of the argument{'s' if len(which) > 1 else ''} {_join(which)}.")
    else:
        why = (f" This concrete value was not available in Python because it is computed from "
               f"the traced arguments {_join(which)}.")
    return (f"The error occurred while tracing the function {debug.func_name} for "
            f"{debug.transform}.{why}")


def staged_inputs(var: Any, eqns: Sequence[Any], inputs: dict) -> list:
    """The values of ``inputs`` (a dict from input variables) that variable ``var`` of a staged
    computation depends on, walking ``eqns`` (objects with ``invars``/``outvars``) backwards."""
    producer = {v: e for e in eqns for v in e.outvars}
    found, seen, todo = set(), set(), [var]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            found.add(inputs[v])
        eqn = producer.get(v)
        if eqn is not None:
            todo.extend(eqn.invars)
    return sorted(found)


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@contextlib.contextmanager
def new_main(trace_type: type, dynamic: bool = False, payload: Any = None,
             debug: "DebugInfo | None" = None) -> Iterator[MainTrace]:
    """Pushes a new transform onto the trace stack for the duration of a ``with`` block.

    Args:
      trace_type: the Trace subclass that interprets primitives at the new level.
      dynamic: stage primitives on constants into this trace too (jit, make_jaxpr).
      payload: transform-specific data (e.g. vmap's axis size and name).
      debug: what is being traced, for error messages (see :class:`DebugInfo`).

    Yields:
      The new MainTrace.
    """
    st = state  # this thread's (one thread-local lookup)
    stack = st.stack
    main = MainTrace(len(stack), trace_type, payload, debug)
    naming = trace_type.binds_names(payload)
    with shared.lock:
        shared.active += 1
    stack.append(main)
    st.depth += 1
    st.naming_levels += naming
    prev_dynamic = st.dynamic
    if dynamic:
        st.dynamic = main
    try:
        yield main
    finally:
        st.dynamic = prev_dynamic
        stack.pop()
        st.depth -= 1
        st.naming_levels -= naming
        main.active = False
        with shared.lock:
            shared.active -= 1
        if debug is not None:
            # the input tracers point back to this main: drop them so that the tracers (and
            # the residuals a staged tangent holds) are freed by reference counting
            debug.in_tracers = ()


@contextlib.contextmanager
def eager_region() -> Iterator[None]:
    """Runs the body with no active transform (for work that must happen eagerly, e.g. compiling)."""
    st = state
    saved = (st.stack, st.dynamic, st.depth, st.naming_levels)
    st.stack, st.dynamic, st.depth, st.naming_levels = [_base_main], _base_main, 0, 0
    sharding = sys.modules.get("plax.sharding")  # loaded with plax; None while it loads
    try:
        if sharding is None:
            yield
        else:
            with sharding.internal_eager_work():  # not a user's eager work (no placement)
                yield
    finally:
        st.stack, st.dynamic, st.depth, st.naming_levels = saved


# What, besides a function's arguments, changes the jaxpr that tracing it produces: each
# source returns a hashable value describing its part of the current context (the sizes of
# the named axes bound around the trace, for one). Caches of traced jaxprs (jit's) put
# ``trace_context()`` in their keys, so one function traced in two contexts gets two jaxprs.
_context_sources: list[Callable[[], Any]] = []


def register_trace_context(source: Callable[[], Any]) -> None:
    """Adds ``source`` to the trace context that keys caches of traced jaxprs.

    ``source()`` is called whenever a cached trace is looked up (never on jit's fast path,
    which runs with no transform active) and must return a hashable value, equal between two
    contexts exactly when tracing the same function in them gives the same jaxpr. Return
    ``()`` when nothing is bound: the common case stays one short tuple.

    Args:
      source: a callable taking no arguments.

    Example:
      >>> register_trace_context(lambda: tuple(my_axis_env.items()))  # doctest: +SKIP
    """
    _context_sources.append(source)


def trace_context() -> tuple:
    """The current trace context: one value per registered source (see
    :func:`register_trace_context`)."""
    return tuple([source() for source in _context_sources])


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


# A rule that may move a primitive's application above its operands' top trace: a
# transform whose level binds something the primitive refers to (vmap's axis names, which a
# collective or a call whose body holds one refers to) must process it even when no operand
# belongs to it. See register_level_rule.
_level_rule: list = [lambda primitive, params, top: top]
_level_primitives: list = [frozenset()]


def register_level_rule(rule: Callable[[Any, dict, "MainTrace"], "MainTrace"],
                        primitives) -> None:
    """Sets the rule that picks the level processing a primitive when transforms above its
    operands' top level are active.

    ``rule(primitive, params, top)`` gets the main of the operands' top trace and returns it,
    or a main above it that must process the application. It is consulted only when a level
    that binds names (:meth:`Trace.binds_names`) is active and the stack holds levels above
    ``top`` (never on the common path, where the operands belong to the innermost
    transform). The batching module sets it: a ``vmap(axis_name=...)`` level runs a
    collective over its name, or a ``jit``/``cond``/``scan``/``while`` whose body holds one,
    even when no operand is batched.

    Args:
      rule: the callable described above.
      primitives: the (live) set of the primitives the rule may move; others are never
        passed to it.
    """
    _level_rule[0] = rule
    _level_primitives[0] = primitives


def bind_with_trace(primitive, args, params):
    """Binds ``primitive`` on the top trace among ``args`` (the slow path of ``bind``)."""
    trace = find_top_trace(args)
    st = state
    if st.naming_levels and primitive in _level_primitives[0] and \
            len(st.stack) > trace.main.level + 1:
        main = _level_rule[0](primitive, params, trace.main)
        if main is not trace.main:
            trace = main.with_cur_trace()
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

"""Primitive: an atomic operation with a name, parameters and an abstract-eval rule."""
from __future__ import annotations

from typing import Any, Callable

from plax.core import trace as _trace

_shared = _trace.shared  # process-wide: the eager evaluator, the count of active transforms
_state = _trace.state  # the running thread's trace stack (thread-local)
_bind_with_trace = _trace.bind_with_trace


class Primitive:
    """An atomic operation that every transform and backend knows by name.

    A primitive has an abstract-evaluation rule (ShapedArrays in, ShapedArray or
    a tuple of them out) that checks its operands; its transform rules live in
    the registry (:mod:`plax.core.registry`), its implementations in backends.

    Example:
      >>> my_sin_p = Primitive("my_sin")
      >>> _ = my_sin_p.def_abstract_eval(lambda x: x)   # same shape and dtype out
      >>> plax.make_jaxpr(my_sin_p.bind)(1.0)
      { lambda ; a:f32[]. let b:f32[] = my_sin a in (b,) }
    """

    __slots__ = ("name", "multiple_results", "_abstract_eval", "_aval_cache", "__weakref__")

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self._abstract_eval: Callable | None = None
        self._aval_cache: dict = {}

    def __repr__(self) -> str:
        return self.name

    def def_abstract_eval(self, rule: Callable) -> Callable:
        """Registers ``rule(*avals, **params) -> aval(s)`` as this primitive's shape/dtype rule."""
        self._abstract_eval = rule
        return rule

    def abstract_eval(self, *avals, **params):
        """Output abstract value(s) of applying this primitive to ``avals``.

        Raises:
          TypeError / ValueError: the primitive's own error for bad operands.
        """
        if self._abstract_eval is None:
            raise NotImplementedError(f"Primitive {self.name!r} has no abstract evaluation rule.")
        return self._abstract_eval(*avals, **params)

    def abstract_eval_cached(self, avals: tuple, params: dict):
        """:meth:`abstract_eval` memoised on (avals, params): eager dispatch calls it per op."""
        try:
            key = (avals, tuple(params.items())) if params else avals
            return self._aval_cache[key]
        except KeyError:
            out = self.abstract_eval(*avals, **params)
            if len(self._aval_cache) > 8192:
                self._aval_cache.clear()
            self._aval_cache[key] = out
            return out
        except TypeError:  # unhashable parameter: no caching
            return self.abstract_eval(*avals, **params)

    def bind(self, *args, **params) -> Any:
        """Applies the primitive: eagerly when no transform is active, else via the top trace."""
        # no transform active in any thread (the common case: one plain attribute read), or
        # none in this one (a thread-local read, paid only while some thread traces)
        if _shared.active == 0 or _state.depth == 0:
            return _shared.eval_primitive(self, args, params)
        return _bind_with_trace(self, args, params)

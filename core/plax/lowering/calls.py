"""Call primitives: equations whose body is a sub-jaxpr (``jit``), which lowering may splice."""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr, JaxprEqn

_call_primitives: dict = {}


def register_call_primitive(primitive, jaxpr_param: str = "jaxpr") -> None:
    """Declares ``primitive`` a call: its ``params[jaxpr_param]`` (a ClosedJaxpr) is its body.

    A call equation the emitter declines is spliced into its caller: its body's equations
    are lowered in its place.
    """
    _call_primitives[primitive] = jaxpr_param


def call_body(eqn: JaxprEqn) -> ClosedJaxpr | None:
    """The body of a call equation (``jit``), or None for other equations."""
    param = _call_primitives.get(eqn.primitive)
    if param is None:
        return None
    body = eqn.params[param]
    return body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, [])

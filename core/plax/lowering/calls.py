"""Call primitives: equations whose body is a sub-jaxpr (``jit``), which lowering may splice."""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from plax.core.passes import inline_param

_call_primitives: dict = {}


def register_call_primitive(primitive, jaxpr_param: str = "jaxpr") -> None:
    """Declares ``primitive`` a call: its ``params[jaxpr_param]`` (a ClosedJaxpr) is its body.

    A call equation the emitter declines is spliced into its caller: its body's equations
    are lowered in its place.
    """
    _call_primitives[primitive] = jaxpr_param


def call_body(eqn: JaxprEqn) -> ClosedJaxpr | None:
    """The body of a call equation (``jit``) that may be spliced into its caller, or None for
    other equations and for a call pinned to a device or backend (``jit(f, backend="numpy")``:
    ``params["device"]``/``params["backend"]``), which runs as a program of its own (its
    body kernel, :mod:`plax.lowering.bodies`) unless :func:`pinned_call_body` finds it
    pinned to the caller's own backend and device."""
    if is_pinned_call(eqn):
        return None
    return _body(eqn)


def is_pinned_call(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is a call pinned to a device or backend.

    Example:
      >>> is_pinned_call(plax.make_jaxpr(plax.jit(jnp.sin))(1.0).jaxpr.eqns[0])
      False
      >>> f = plax.jit(jnp.sin, backend="numpy")
      >>> is_pinned_call(plax.make_jaxpr(f)(1.0).jaxpr.eqns[0])
      True
    """
    params = eqn.params
    return eqn.primitive in _call_primitives and (
        params.get("device") is not None or params.get("backend") is not None)


def pinned_call_body(eqn: JaxprEqn, backend, device) -> ClosedJaxpr | None:
    """The body of a call pinned to exactly ``backend`` on ``device`` (a program's own target:
    spliced like any call), else None.

    Args:
      eqn: an equation of the program being lowered.
      backend, device: the program's backend and device.

    Example:
      >>> f = plax.jit(jnp.sin, backend="numpy")
      >>> eqn = plax.make_jaxpr(lambda x: f(x))(1.0).jaxpr.eqns[0]
      >>> cpu = plax.devices("cpu")[0]
      >>> pinned_call_body(eqn, plax.plugins.registry().get_backend("numpy"), cpu) is not None
      True
    """
    if not is_pinned_call(eqn):
        return None
    from plax.transforms.call import call_target
    chosen, target = call_target(eqn.params.get("device"), eqn.params.get("backend"), device)
    return _body(eqn) if chosen is backend and target == device else None


def _body(eqn: JaxprEqn) -> ClosedJaxpr | None:
    param = _call_primitives.get(eqn.primitive)
    if param is None:
        return None
    body = eqn.params[param]
    return body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, [])


def spliced_calls(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with its call equations (``jit``; ``custom_jvp_call``/``custom_vjp_call``,
    whose primal body is what runs) replaced by their bodies' equations, recursively, so a
    backend's fusion clusters span them (``random.normal`` inside a sampler's loop is
    ``bits_data``, ``_uniform``, ``fma_`` and ``erf_inv_`` calls); calls whose bodies hold
    constants stay. Returns ``jaxpr`` itself when nothing changes.

    Example:
      >>> j = plax.make_jaxpr(lambda x: plax.jit(jnp.sin)(x) + 1)(1.0).jaxpr
      >>> [e.primitive.name for e in spliced_calls(j).eqns]
      ['sin', 'add']
    """
    if not any(_call_of(e) is not None for e in jaxpr.eqns):
        return jaxpr
    rename: dict = {}

    def sub(v):
        return rename.get(v, v) if isinstance(v, Var) else v

    eqns: list = []
    for e in jaxpr.eqns:
        body = _call_of(e)
        if body is None:
            eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars, e.params))
            continue
        inner = spliced_calls(body.jaxpr)
        local = dict(zip(inner.invars, [sub(v) for v in e.invars]))

        def lsub(v, local=local):
            return local.get(v, v) if isinstance(v, Var) else v

        for ie in inner.eqns:
            outs = [Var(v.aval) for v in ie.outvars]
            local.update(zip(ie.outvars, outs))
            eqns.append(JaxprEqn(ie.primitive, [lsub(v) for v in ie.invars], outs, ie.params))
        for outer, res in zip(e.outvars, inner.outvars):
            rename[outer] = lsub(res)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [sub(v) for v in jaxpr.outvars], eqns)


def _call_of(e: JaxprEqn) -> ClosedJaxpr | None:
    body = call_body(e)
    if body is None and e.params.get(inline_param(e)) is not None:
        body = e.params[inline_param(e)]
        body = body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, [])
    return body if body is not None and not body.consts else None

"""The NumPy backend object: host buffers, eager execution and jaxpr compilation."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plax.backend import Backend, UnsupportedPrimitiveError
from plax.core.jaxpr import Jaxpr, Literal, Var
from plax.devices import cpu_devices
from plax_numpy.registry import IMPLS, quiet_enter, quiet_leave


def _load_impls() -> dict:
    # Importing the modules fills IMPLS; done once, when the backend is first created.
    from plax_numpy import (impls_dot, impls_elementwise, impls_indexing, impls_random,  # noqa: F401
                            impls_reduction, impls_shape)
    return IMPLS


class NumpyBackend(Backend):
    """The reference backend: every primitive is a NumPy function; jit interprets jaxprs.

    ``compile`` generates a straight-line Python function (one call per equation),
    which keeps jit's per-call overhead to a few function calls.
    """

    name = "numpy"
    platform = "cpu"
    priority = 0

    def __init__(self) -> None:
        self.impls = _load_impls()

    def devices(self) -> list:
        return list(cpu_devices())

    def put(self, host_array: np.ndarray, device) -> Any:
        return host_array

    def to_host(self, buffer: Any) -> np.ndarray:
        return buffer

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        try:
            fn = self.impls[primitive]
        except KeyError:
            raise UnsupportedPrimitiveError(self.name, primitive.name) from None
        return fn(*buffers, **params)

    def eager_impl(self, primitive):
        return self.impls.get(primitive)  # None: execute raises UnsupportedPrimitiveError

    def compile(self, jaxpr: Jaxpr, device) -> Callable[..., Sequence[Any]]:
        return compile_jaxpr(jaxpr, self.impls, self.name)


def compile_jaxpr(jaxpr: Jaxpr, impls: dict, backend_name: str = "numpy",
                  ) -> Callable[..., list]:
    """Turns ``jaxpr`` into a Python function over ``impls``.

    Each equation becomes one line ``out = _fN(in, ...)``, where ``_fN`` is the
    primitive's implementation with its parameters bound; literals become
    globals. The generated source is kept on the function as ``__plax_source__``.
    """
    names: dict = {}
    env: dict[str, Any] = {}

    def name_of(v) -> str:
        if isinstance(v, Literal):
            key = f"_c{len(env)}"
            env[key] = np.asarray(v.val, v.aval.dtype)
            return key
        n = names.get(v)
        if n is None:
            n = names[v] = f"v{len(names)}"
        return n

    params_in = [name_of(v) for v in jaxpr.invars]
    last_use = _last_uses(jaxpr)
    fresh: set = set()   # variables holding arrays this function allocated (safe to overwrite)
    body = []
    direct = 0  # equations that call a NumPy ufunc directly (warnings off around the body)
    for i, eqn in enumerate(jaxpr.eqns):
        fn = impls.get(eqn.primitive)
        if fn is None:
            raise UnsupportedPrimitiveError(backend_name, eqn.primitive.name)
        key = f"_f{i}"
        ufunc = _direct_ufunc(fn, eqn)
        args = ", ".join(name_of(v) for v in eqn.invars)
        outs = [name_of(v) for v in eqn.outvars]
        if ufunc is not None:
            env[key] = ufunc
            direct += 1
            reuse = _reusable_operand(eqn, i, fresh, last_use)
            if reuse is not None:  # write into a dead temporary instead of allocating
                args += f", out={name_of(reuse)}"
            if eqn.outvars[0].aval.shape:
                fresh.add(eqn.outvars[0])
        else:
            env[key] = _bind_params(fn, eqn.params)
        if eqn.primitive.multiple_results:
            lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
            body.append(f"{lhs} = {key}({args})")
        else:
            body.append(f"{outs[0]} = {key}({args})")
        # Drop temporaries after their last use: large intermediates that stay alive until
        # the function returns defeat the allocator's reuse and cost page faults.
        dead = sorted({name_of(v) for v in eqn.invars
                       if isinstance(v, Var) and last_use.get(v) == i and v not in jaxpr.invars})
        if dead:
            body.append(f"del {', '.join(dead)}")
    body.append(f"return [{', '.join(name_of(v) for v in jaxpr.outvars)}]")
    lines = [f"def _compiled({', '.join(params_in)}):"]
    if direct:
        env["_quiet_enter"], env["_quiet_leave"] = quiet_enter, quiet_leave
        lines += ["    _token = _quiet_enter()", "    try:"]
        lines += ["        " + b for b in body]
        lines += ["    finally:", "        _quiet_leave(_token)"]
    else:
        lines += ["    " + b for b in body]
    source = "\n".join(lines)
    exec(compile(source, f"<plax_numpy jit {id(jaxpr):x}>", "exec"), env)
    fn = env["_compiled"]
    fn.__plax_source__ = source
    return fn


def _last_uses(jaxpr: Jaxpr) -> dict:
    """For each variable read by an equation, the index of the last equation reading it
    (variables that are outputs of the jaxpr are never dead)."""
    last: dict = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if isinstance(v, Var):
                last[v] = i
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            last[v] = len(jaxpr.eqns)
    return last


def _reusable_operand(eqn, i: int, fresh: set, last_use: dict):
    """An operand of a direct-ufunc equation whose buffer can take the result: allocated by
    this function, dead after this equation, and of the result's shape and dtype."""
    out = eqn.outvars[0].aval
    if not out.shape:
        return None
    for v in eqn.invars:
        if (isinstance(v, Var) and v in fresh and last_use.get(v) == i
                and v.aval.shape == out.shape and v.aval.dtype == out.dtype):
            return v
    return None


def _direct_ufunc(fn: Callable, eqn) -> Callable | None:
    """The NumPy ufunc to call in place of ``fn`` for this equation, if that is exact.

    Elementwise impls registered from a ufunc carry ``__plax_ufunc__``; the jaxpr's types
    tell at compile time that no low-precision (float16/bfloat16) detour is needed, so the
    generated code can skip the impl's wrappers.
    """
    spec = getattr(fn, "__plax_ufunc__", None)
    if spec is None or eqn.params:
        return None
    ufunc, low_precision = spec
    if low_precision and any(v.aval.dtype.itemsize == 2 and v.aval.dtype.kind in "fV"
                             for v in eqn.invars):
        return None
    return ufunc


def _bind_params(fn: Callable, params: dict) -> Callable:
    if not params:
        return fn
    return lambda *args: fn(*args, **params)

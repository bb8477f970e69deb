"""Functions whose jaxprs hold sub-jaxprs, and a log of which backend compiles what.

Shared by tests/test_subjaxpr_backend.py in this process and in the child interpreters it
starts (another default backend, the toy backend, the simulated GPU): each case is a fresh
function per call of :func:`cases`, so no trace or executable cache carries over between
checks.
"""
from __future__ import annotations

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax


def cases() -> dict:
    """name -> (function, arguments): one per kind of equation that holds a body."""
    x = np.linspace(-1.0, 2.0, 6, dtype=np.float32).reshape(3, 2)

    def cond(x):
        return lax.cond(x.sum() > 0, lambda x: x * 2.0, lambda x: x - 1.0, x)

    def switch(x):
        return lax.switch(2, [lambda x: x + 1.0, lambda x: x * 3.0, lambda x: -x], x)

    def while_(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[1]

    def scan(x):
        return lax.scan(lambda c, r: (c + r.sum(), c * r), np.float32(1.0), x)

    def scan_reverse(x):
        return lax.scan(lambda c, r: (c * 0.5 + r, c - r), x[0], x, reverse=True)

    def fori(x):  # Python bounds: a scan; the body closes over x
        return lax.fori_loop(0, 3, lambda i, c: c * 0.9 + x, x)

    def remat(x):
        return plax.checkpoint(lambda x: lax.scan(lambda c, r: (c + r, c * r), x[0], x))(x)

    def grad_of_scan(x):
        return plax.grad(lambda x: lax.scan(lambda c, r: (c * r, c), 1.0, x[:, 0])[0])(x)

    @plax.custom_jvp
    def clipped(x):
        return lax.cond(x.sum() > 0, lambda x: x, lambda x: x * 0.0, x)

    clipped.defjvp(lambda p, t: (clipped(*p), t[0]))

    def custom_jvp(x):
        return clipped(x)

    @plax.custom_vjp
    def summed(x):
        return lax.scan(lambda c, r: (c + r, c), np.zeros(2, np.float32), x)[0]

    summed.defvjp(lambda x: (summed(x), x), lambda x, g: (jnp.broadcast_to(g, x.shape),))

    def custom_vjp(x):
        return summed(x)

    def grad_custom_vjp(x):
        return plax.value_and_grad(lambda x: summed(x).sum())(x)

    def nested_jit(x):
        return plax.jit(lambda x: lax.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 2.0 + 1.0,
                                                 x))(x)

    def vmap_cond(x):
        # an unbatched predicate: the cond stays a cond (a batched one becomes a select)
        return plax.vmap(lambda r: lax.cond(x.sum() > 0, lambda r: r * 2.0, lambda r: -r, r))(x)

    def nested_scan_cond(x):
        def body(c, r):
            return lax.cond(c > 0, lambda c: c - r.sum(), lambda c: c + 1.0, c), c
        return lax.scan(body, np.float32(0.5), x)

    return {f.__name__.rstrip("_"): (f, (x,)) for f in
            (cond, switch, while_, scan, scan_reverse, fori, remat, grad_of_scan, custom_jvp,
             custom_vjp, grad_custom_vjp, nested_jit, vmap_cond, nested_scan_cond)}


class CompileLog:
    """Records ``(backend name, device)`` for every ``Backend.compile`` call while active.

    Example:
      >>> with CompileLog() as log:
      ...     plax.jit(f, backend="numpy")(x)
      >>> log.backends()
      {'numpy'}
    """

    def __init__(self):
        self.calls: list = []
        self._saved: list = []

    def __enter__(self) -> "CompileLog":
        from plax import plugins
        for backend in plugins.registry().backends.values():
            original = backend.compile

            def compile(jaxpr, device, _b=backend, _original=original):
                self.calls.append((_b.name, repr(device)))
                return _original(jaxpr, device)

            backend.compile = compile  # an instance attribute shadows the method
            self._saved.append(backend)
        return self

    def __exit__(self, *exc) -> None:
        for backend in self._saved:
            del backend.compile

    def backends(self) -> set:
        return {name for name, _ in self.calls}

    def devices(self) -> set:
        return {device for _, device in self.calls}


def to_host(tree) -> list:
    """The leaves of ``tree`` as float64 NumPy arrays (to compare across backends)."""
    return [np.asarray(leaf, np.float64) for leaf in plax.tree_util.tree_leaves(tree)]


def check_all(backend: str | None, device=None) -> dict:
    """Runs every case under ``jit(f, backend=backend)`` (``device=`` when given) and
    eagerly; returns ``{name: {"compiled_by": [...], "devices": [...], "values_match": bool}}``
    comparing with the same function run eagerly on the CPU."""
    out = {}
    for name, (f, args) in cases().items():
        with plax.default_device(plax.devices("cpu")[0]):
            want = to_host(f(*args))  # eager
        f, args = cases()[name]  # fresh: nothing cached from the reference run
        kw = {} if device is None else {"device": device}
        with CompileLog() as log:
            got = to_host(plax.jit(f, backend=backend, **kw)(*args))
        match = len(got) == len(want) and all(
            g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-6)
            for g, w in zip(got, want))
        out[name] = {"compiled_by": sorted(log.backends()), "devices": sorted(log.devices()),
                     "compiles": len(log.calls), "values_match": bool(match)}
    return out


def check_eager() -> dict:
    """Runs every case eagerly (on the default device); returns ``{name: [backends that
    compiled something]}``."""
    out = {}
    for name, (f, args) in cases().items():
        with CompileLog() as log:
            f(*args)
        out[name] = sorted(log.backends())
    return out

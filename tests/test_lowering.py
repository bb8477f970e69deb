"""plax.lowering: liveness, fusion clusters, the program driver and the per-equation fallback.

Backends are registered by hand for each test: a CPU backend whose emitter compiles only a
handful of primitives, one on a platform of its own whose buffers are boxed (so the
fallback must transfer), and a fusing one that computes each cluster in one step.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import plax
import plax.numpy as jnp
from plax import lax, plugins
from plax.backend import Backend, UnsupportedPrimitiveError
from plax.core import Primitive, ShapedArray
from plax.core.jaxpr import Literal, sub_jaxprs
from plax.device import Device, cpu_devices
from plax.lowering import (Cluster, Emitter, FusionOptions, PlaxFallbackWarning, dead_after,
                           find_clusters, last_uses, literal_value, lower, order_for_fusion,
                           reference_kernel)
from plax.plugins import hookimpl

_ids = itertools.count()


class _PartialEmitter(Emitter):
    """Compiles only ``allowed`` primitives (reference kernels); declines everything else."""

    def __init__(self, allowed, box=None, unbox=None):
        self.allowed, self.box, self.unbox = allowed, box, unbox
        self.emitted: list[str] = []

    def emit_equation(self, eqn):
        if eqn.primitive.name not in self.allowed:
            return None
        self.emitted.append(eqn.primitive.name)
        fn, params = reference_kernel(eqn.primitive), eqn.params
        if self.box is None:
            return lambda *bufs: fn(*bufs, **params)
        return lambda *bufs: self.box(fn(*[self.unbox(b) for b in bufs], **params))

    def constant(self, host_value):
        return host_value if self.box is None else self.box(host_value)


class _Box:
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = np.asarray(data)


class _BoxDevice(Device):
    platform = "boxland"
    _repr_name = "BoxDevice"


class _PartialBackend(Backend):
    """A backend that compiles a few primitives through plax.lowering (see _PartialEmitter)."""

    priority = -1  # never the default

    def __init__(self, name, allowed, boxed=False):
        self.name, self.allowed, self.boxed = name, allowed, boxed
        self.platform = "boxland" if boxed else "cpu"
        self._devices = [_BoxDevice(0, platform="boxland")] if boxed else list(cpu_devices())
        self.emitters: list[_PartialEmitter] = []

    def devices(self):
        return list(self._devices)

    def put(self, host_array, device):
        return _Box(np.array(host_array)) if self.boxed else host_array

    def to_host(self, buffer):
        return buffer.data if self.boxed else buffer

    def owns_buffer(self, buffer):
        return isinstance(buffer, _Box) if self.boxed else super().owns_buffer(buffer)

    def execute(self, primitive, *buffers, **params):
        out = reference_kernel(primitive)(*[self.to_host(b) for b in buffers], **params)
        if primitive.multiple_results:
            return [self.put(o, None) for o in out]
        return self.put(out, None)

    def compile(self, jaxpr, device):
        emitter = (_PartialEmitter(self.allowed, _Box, lambda b: b.data) if self.boxed
                   else _PartialEmitter(self.allowed))
        self.emitters.append(emitter)
        return lower(jaxpr, emitter, self, device)


@pytest.fixture
def register_backend():
    """Registers a backend for one test under a fresh name; yields the factory."""
    names = []

    def register(backend):
        class Plugin:
            @hookimpl
            def plax_backends(self):
                return [backend]

        names.append(plugins.register_plugin(Plugin(), name=f"{backend.name}-plugin"))
        return backend

    yield register
    for name in names:
        plugins.unregister_plugin(name)


def _fresh(prefix):
    return f"{prefix}{next(_ids)}"


def _f(x, y):
    return jnp.exp(jnp.sin(x) * y + 1.0).sum() + jnp.tanh(y)[0]


# ------------------------------------------------------------------ liveness and literals

def test_last_uses_and_dead_after():
    jaxpr = plax.make_jaxpr(lambda x: jnp.sin(x) * x + jnp.cos(x))(jnp.ones(3)).jaxpr
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names == ["sin", "mul", "cos", "add"]
    x = jaxpr.invars[0]
    last = last_uses(jaxpr)
    assert last[x] == 2  # read by sin, mul and cos
    assert last[jaxpr.outvars[0]] == len(jaxpr.eqns)
    dead = dead_after(jaxpr)
    assert dead[0] == [] and dead[1] == [jaxpr.eqns[0].outvars[0]]   # sin's value dies at mul
    assert x not in {v for vs in dead for v in vs}                   # the caller owns inputs
    assert dead[3] == [jaxpr.eqns[1].outvars[0], jaxpr.eqns[2].outvars[0]]


def test_literal_value_is_a_host_scalar_of_the_literal_dtype():
    lit = Literal(2.5, ShapedArray((), np.dtype(np.float32), True))
    v = literal_value(lit)
    assert isinstance(v, np.ndarray) and v.dtype == np.float32 and v.shape == () and v == 2.5


# ------------------------------------------------------------------ fusion clusters

def _units(fn, *args):
    return list(find_clusters(plax.make_jaxpr(fn)(*args).jaxpr))


def test_elementwise_chain_and_its_reductions_form_one_cluster():
    (c,) = _units(lambda x, y: (jnp.sin(x) * 2.0 + y).sum(), jnp.ones((2, 3)), jnp.ones((2, 3)))
    assert isinstance(c, Cluster) and c.shape == (2, 3)
    assert [e.primitive.name for e in c.eqns] == ["sin", "mul", "add", "reduce_sum"]
    assert len(c.outputs) == 1 and c.outputs[0].aval.shape == ()
    assert sum(isinstance(v, Literal) for v in c.inputs) == 1 and len(c.inputs) == 3


def test_broadcast_joins_and_scalars_are_read_by_broadcasting():
    units = _units(lambda x, s: x * jnp.broadcast_to(s, (4,)) + s, jnp.ones(4), jnp.float32(2))
    (c,) = units
    assert [e.primitive.name for e in c.eqns] == ["broadcast_in_dim", "mul", "add"]


def test_scalar_equations_the_run_does_not_feed_run_before_it():
    """``clip``'s converted bounds (scalar equations between its ``max`` and ``min``) no
    longer cut the loop in two: they are yielded first, the loop stays one cluster; a scalar
    computed from the run's own values still ends it."""
    outer = plax.make_jaxpr(lambda x: jnp.clip(x, -1.0, 0.5))(jnp.ones(8)).jaxpr
    (call,) = outer.eqns
    body = call.params["jaxpr"].jaxpr   # convert, max, convert, min
    units = list(find_clusters(body))
    assert [type(u).__name__ for u in units] == ["JaxprEqn", "JaxprEqn", "Cluster"]
    assert all(u.outvars[0].aval.shape == () for u in units[:2])
    assert [e.primitive.name for e in units[2].eqns] == ["max", "min"]
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(plax.jit(lambda x: jnp.clip(jnp.sin(x), -1.0, 0.5)
                                                   * 2.0)(x)),
                               np.clip(np.sin(x.astype(np.float64)), -1, 0.5) * 2, rtol=1e-6)
    units = _units(lambda x: jnp.sin(x) * (jnp.sin(x).sum() * 2.0), jnp.ones(8))
    eqns = lambda u: u.eqns if isinstance(u, Cluster) else [u]  # noqa: E731
    where = {e.primitive.name + str(e.outvars[0].aval.shape): i
             for i, u in enumerate(units) for e in eqns(u)}
    assert where["reduce_sum()"] < where["mul()"] < where["mul(8,)"]  # fed by the run: after it


def test_scalar_producers_fold_into_their_one_reading_cluster():
    """With ``scalars=True`` (``Emitter.fuses_scalar_producers``) rank-0 elementwise producers
    read only by one later cluster move into it, ahead of its equations; a scalar that is also
    an output of the program, or read by two clusters, stays where it was."""
    def f(x, lo, hi):
        width = hi.astype(jnp.float32) - lo      # rank 0: convert, sub
        return jnp.sin(x) * width + lo
    jaxpr = plax.make_jaxpr(f)(jnp.ones(8), jnp.float32(1), jnp.float32(3)).jaxpr
    plain = list(find_clusters(jaxpr))
    assert any(isinstance(u, Cluster) and u.shape == () for u in plain) or \
        sum(not isinstance(u, Cluster) for u in plain) >= 1
    (c,) = find_clusters(jaxpr, FusionOptions(scalars=True))
    assert c.shape == (8,) and c.eqns[0].outvars[0].aval.shape == ()
    assert {e.primitive.name for e in c.eqns} >= {"sub", "sin", "mul", "add"}
    assert all(v.aval.shape == () for v in c.inputs if v.aval.shape != (8,))
    assert c.outputs == list(jaxpr.outvars)
    # the scalar also returned: it stays a unit of its own, before the cluster
    jaxpr = plax.make_jaxpr(lambda x, lo, hi: (jnp.sin(x) * (hi - lo), hi - lo))(
        jnp.ones(8), jnp.float32(1), jnp.float32(3)).jaxpr
    units = list(find_clusters(jaxpr, FusionOptions(scalars=True)))
    assert len(units) == 2 and units[1].shape == (8,)
    # read by two clusters of different shapes: not folded
    def two(x, y, s):
        t = s * 2.0
        return jnp.sin(x) * t, jnp.cos(y) * t
    jaxpr = plax.make_jaxpr(two)(jnp.ones(8), jnp.ones(5), jnp.float32(3)).jaxpr
    units = list(find_clusters(jaxpr, FusionOptions(scalars=True)))
    assert not isinstance(units[0], Cluster) and units[0].outvars[0].aval.shape == ()
    assert [u.shape for u in units[1:]] == [(8,), (5,)]


def test_clusters_split_where_fusion_is_illegal():
    # a reduction's result read inside the same loop, a shape change, a non-fusible primitive
    # (lax.cumsum: jnp.cumsum stages a jit call, which lowering splices before clustering)
    units = _units(lambda x: (x - x.sum()) * 2.0, jnp.ones(5))
    assert not any(isinstance(u, Cluster) and any(e.primitive.name == "sub" for e in u.eqns)
                   and any(e.primitive.name == "reduce_sum" for e in u.eqns) for u in units)
    units = _units(lambda x: jnp.sin(x).reshape(2, 2) * 2.0, jnp.ones(4))
    assert [type(u).__name__ for u in units] == ["JaxprEqn", "JaxprEqn", "JaxprEqn"]
    units = _units(lambda x: plax.lax.cumsum(jnp.sin(x) * 2.0, 0) + 1.0, jnp.ones(4))
    assert isinstance(units[0], Cluster) and units[1].primitive.name == "cumsum"


def _valid_order(jaxpr, order_eqns) -> bool:
    seen = set(jaxpr.invars) | set(jaxpr.constvars)
    for e in order_eqns:
        if not all(v in seen for v in e.invars if not isinstance(v, Literal)):
            return False
        seen.update(e.outvars)
    return sorted(map(id, order_eqns)) == sorted(map(id, jaxpr.eqns))


def test_order_for_fusion_makes_interleaved_chains_consecutive():
    """A pmean of a pytree followed by an SGD update writes every division first, then the
    updates: as written each division is cut off from its update."""
    shapes = [(6, 4), (4,), (4, 3), (3,)]
    params = [jnp.ones(s) for s in shapes]

    def update(ps, gs):
        gs = [g / 2.0 for g in gs]
        return [p - 0.01 * g for p, g in zip(ps, gs)]

    jaxpr = plax.make_jaxpr(update)(params, params).jaxpr
    assert not any(isinstance(u, Cluster) and u.eqns[0].primitive.name == "div"
                   for u in find_clusters(jaxpr))
    ordered = order_for_fusion(jaxpr)
    assert _valid_order(jaxpr, ordered.eqns) and ordered.outvars == jaxpr.outvars
    clusters = [u for u in find_clusters(ordered) if isinstance(u, Cluster)]
    assert sorted(c.shape for c in clusters) == sorted(shapes)
    assert all([e.primitive.name for e in c.eqns] == ["div", "mul", "sub"] for c in clusters)
    # already consecutive: the same object back
    chain = plax.make_jaxpr(lambda x: jnp.sin(x) * 2.0 + 1.0)(jnp.ones(3)).jaxpr
    assert order_for_fusion(chain) is chain


def test_order_for_fusion_keeps_effects_in_order_and_values_equal():
    def f(a, b):
        plax.debug.callback(lambda: None)
        a2 = a / 2
        plax.debug.callback(lambda: None)
        b2 = b / 2
        return a - a2, b - b2

    args = (jnp.arange(3.0), jnp.arange(4.0))
    jaxpr = plax.make_jaxpr(f)(*args).jaxpr
    ordered = order_for_fusion(jaxpr)
    assert _valid_order(jaxpr, ordered.eqns)
    effects = [i for i, e in enumerate(ordered.eqns) if e.primitive.name == "debug_callback"]
    original = [e for e in jaxpr.eqns if e.primitive.name == "debug_callback"]
    assert [ordered.eqns[i] for i in effects] == original
    for got, want in zip(plax.jit(f)(*args), f(*args)):
        np.testing.assert_array_equal(got, want)


def test_cluster_outputs_are_the_values_read_after_it():
    (c, rest) = _units(lambda x: (lambda s: (s, jnp.sin(s) + 1.0))(x * 2.0)[1].reshape(2, 2),
                       jnp.ones(4))
    assert [v.aval.shape for v in c.outputs] == [(4,)] and rest.primitive.name == "reshape"


class _FusingEmitter(_PartialEmitter):
    """Computes each cluster in one step, by interpreting its equations on reference kernels."""

    fuses = True

    def __init__(self):
        super().__init__(allowed=())
        self.clusters: list[Cluster] = []

    def emit_cluster(self, cluster):
        self.clusters.append(cluster)

        def run(*bufs):
            env = dict(zip(map(id, cluster.inputs), bufs))
            for e in cluster.eqns:
                args = [env[id(v)] for v in e.invars]
                env[id(e.outvars[0])] = reference_kernel(e.primitive)(*args, **e.params)
            return [env[id(v)] for v in cluster.outputs]
        return run

    def emit_equation(self, eqn):
        fn, params = reference_kernel(eqn.primitive), eqn.params
        return lambda *bufs: fn(*bufs, **params)


class _FusingBackend(_PartialBackend):
    def compile(self, jaxpr, device):
        emitter = _FusingEmitter()
        self.emitters.append(emitter)
        return lower(jaxpr, emitter, self, device)


_UNARY = [jnp.sin, jnp.exp, jnp.tanh, jnp.abs, lambda v: v * 2.0, lambda v: -v]
_BINARY = [jnp.add, jnp.multiply, jnp.subtract, jnp.maximum]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_UNARY) - 1), st.integers(0, len(_BINARY) - 1),
                          st.integers(0, 2)), min_size=1, max_size=8),
       st.sampled_from([None, 0, 1]))
def test_fused_chains_equal_eager(ops, reduce_axis):
    """Random elementwise chains with broadcasting and a final reduction, jitted whole on a
    backend that runs each cluster as one step, equal the eager result."""
    backend = _FusingBackend(_fresh("fusing"), ())
    names = [plugins.register_plugin(type("P", (), {"plax_backends": hookimpl(
        lambda self: [backend])})(), name=backend.name)]
    try:
        def f(x, row, s):
            vals = [x, row, s]
            acc = x
            for u, b, k in ops:
                acc = _BINARY[b](_UNARY[u](acc), vals[k])
            return acc.sum(axis=reduce_axis), acc
        args = (jnp.linspace(-1.0, 1.0, 6).reshape(2, 3), jnp.array([0.5, -0.25, 1.0]),
                jnp.float32(0.75))
        # (the reference backend's result: the clusters run on its kernels, so a default
        # backend with other transcendental kernels, a GPU one, cannot move the last digits)
        want = plax.jit(f, backend="numpy")(*args)
        got = plax.jit(f, backend=backend.name)(*args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
        assert backend.emitters[0].clusters, "a chain of elementwise ops makes a cluster"
    finally:
        for n in names:
            plugins.unregister_plugin(n)


# ------------------------------------------------------------------ fallback

@pytest.mark.parametrize("boxed", [False, True], ids=["cpu", "other-platform"])
def test_declined_equations_run_on_reference_kernels_with_one_warning_each(register_backend,
                                                                             boxed):
    backend = register_backend(_PartialBackend(_fresh("partial"), {"add", "mul", "sin"},
                                               boxed=boxed))
    x, y = jnp.linspace(0.0, 1.0, 4), jnp.arange(4.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = plax.jit(_f, backend=backend.name)(x, y)
        again = plax.jit(lambda x, y: jnp.exp(x) + jnp.tanh(y), backend=backend.name)(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(_f(x, y)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(again), np.asarray(jnp.exp(x) + jnp.tanh(y)), rtol=1e-6)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)]
    declined = {"exp", "reduce_sum", "tanh", "slice", "squeeze"}
    for name in declined & {e.primitive.name for e in plax.make_jaxpr(_f)(x, y).jaxpr.eqns}:
        assert sum(f"primitive {name!r}" in m for m in fallbacks) == 1, (name, fallbacks)
    assert all(backend.name in m for m in fallbacks)
    assert set(backend.emitters[0].emitted) == {"add", "mul", "sin"}
    if boxed:
        assert list(got.devices())[0].platform == "boxland"


def test_a_primitive_no_backend_runs_is_a_clear_error():
    nowhere_p = Primitive("nowhere")
    nowhere_p.def_abstract_eval(lambda x: x)
    with pytest.raises(UnsupportedPrimitiveError, match="'nowhere'"):
        plax.jit(lambda x: nowhere_p.bind(x) + 1.0)(jnp.ones(2))


# ------------------------------------------------------------------ the NumPy backend as a client

def test_numpy_programs_free_temporaries_and_reuse_them():
    # pinned to the NumPy backend: another CPU backend (Numba) may be the default
    f = plax.jit(lambda x: jnp.exp(jnp.sin(x) * 2.0) + x, backend="numpy")
    x = jnp.ones(1000)
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(np.sin(1.0) * 2.0) + 1.0, rtol=1e-6)
    (entry,) = f._cache.values()
    source = entry.executable.__plax_source__
    assert "del " in source and "out=" in source, source


def test_compiled_as_text_shows_the_numpy_program():
    f = plax.jit(lambda x: jnp.exp(jnp.sin(x) * 2.0) + x, backend="numpy")
    x = jnp.ones(10)
    text = f.lower(x).compile().as_text()
    assert text.startswith("def _compiled(") and "return [" in text, text
    assert text != f.lower(x).as_text()  # the executable's program, not the jaxpr
    f(x)
    (entry,) = f._cache.values()
    assert text == entry.executable.as_text() == entry.executable.__plax_source__


def test_executable_text_protocol():
    from plax.backend import executable_text

    def plain(*bufs):
        return list(bufs)
    assert executable_text(plain) is None
    plain.__plax_source__ = "def _compiled(): ..."
    assert executable_text(plain) == "def _compiled(): ..."
    plain.as_text = lambda: "custom"
    assert executable_text(plain) == "custom"


def test_value_identities_are_erased_before_any_backend_compiles():
    """A primitive declared the identity on values (plax-pmap's pvary) is removed from the
    jaxpr every backend receives, inside loop bodies and jit calls too: no backend needs a
    kernel for it and no fallback runs."""
    from plax.core import passes
    ident_p = Primitive("test_value_identity")
    ident_p.def_abstract_eval(lambda x: x)
    passes.register_value_identity(ident_p)

    def f(xs):
        inner = plax.jit(lambda v: ident_p.bind(v) * 2.0)
        total, ys = plax.lax.scan(lambda c, r: (c + ident_p.bind(r), inner(r)), 0.0, xs)
        return ident_p.bind(total), ys

    closed = plax.make_jaxpr(f)(jnp.arange(4.0))
    erased = passes.erase_value_identities(closed)

    def names(j):
        return [e.primitive.name for e in j.eqns] + [n for e in j.eqns for s in
                                                     sub_jaxprs(e.params) for n in names(s)]
    assert "test_value_identity" in names(closed.jaxpr)
    assert "test_value_identity" not in names(erased.jaxpr)
    plain = plax.make_jaxpr(lambda x: x * 2.0)(1.0)
    assert passes.erase_value_identities(plain) is plain
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for backend in sorted(plugins.registry().backends):
            total, ys = plax.jit(f, backend=backend)(jnp.arange(4.0))
            assert float(total) == 6.0
            np.testing.assert_array_equal(ys, 2.0 * np.arange(4.0))


# ------------------------------------------------------------------ rewrites before fusion

def _log_softmax_loss(x, y):
    # as benchmarks/gpu.py's MLP loss: max written twice, keepdims reductions, a mean
    logz = jnp.log(jnp.sum(jnp.exp(x - x.max(axis=1, keepdims=True)), axis=1, keepdims=True)) \
        + x.max(axis=1, keepdims=True)
    return -jnp.mean(jnp.sum(y * (x - logz), axis=1))


def test_rewrites_before_fusion_merge_sink_and_compose():
    from plax.lowering.simplify import (common_subexpressions, compose_broadcasts,
                                        sink_unit_reshapes, unit_reductions)
    x, y = jnp.ones((4, 3)), jnp.ones((4, 3))
    jaxpr = unit_reductions(plax.make_jaxpr(plax.grad(_log_softmax_loss))(x, y).jaxpr)
    count = lambda j, name: sum(e.primitive.name == name for e in j.eqns)  # noqa: E731
    merged = common_subexpressions(jaxpr)
    assert count(merged, "reduce_max") == 1 < count(jaxpr, "reduce_max")
    assert merged.outvars == jaxpr.outvars and merged.invars == jaxpr.invars
    sunk = sink_unit_reshapes(merged)
    # every elementwise equation now has the shape of its operands' sources: none on [4, 1]
    elementwise = [e for e in sunk.eqns if e.primitive.name in ("log", "add", "div", "mul")]
    assert not [e for e in elementwise if e.outvars[0].aval.shape == (4, 1)], sunk
    assert [e for e in jaxpr.eqns if e.primitive.name in ("log", "add", "div")
            and e.outvars[0].aval.shape == (4, 1)]  # (there were some)
    composed = compose_broadcasts(sunk)
    readers = {id(v) for e in composed.eqns for v in e.invars}
    assert all(id(e.invars[0]) not in {id(b.outvars[0]) for b in composed.eqns
                                       if b.primitive.name == "broadcast_in_dim"}
               for e in composed.eqns if e.primitive.name == "broadcast_in_dim"), composed
    assert all(id(v) in readers or v in composed.outvars for e in composed.eqns for v in e.outvars)
    # the [4] divisions read only through broadcasts are computed in their [4, 3] readers
    from plax.lowering.simplify import hoist_broadcasts
    divs = lambda j: sorted(e.outvars[0].aval.shape for e in j.eqns  # noqa: E731
                            if e.primitive.name == "div")
    assert divs(composed) == [(), (4,), (4,), (4,)]
    assert divs(compose_broadcasts(hoist_broadcasts(composed))) == [(), (4, 3), (4, 3), (4, 3)]
    # a repeated equation whose result is an output stays (the outputs keep their producers)
    j2 = plax.make_jaxpr(lambda v: (v.max(axis=0), v.max(axis=0)))(x).jaxpr
    assert count(common_subexpressions(j2), "reduce_max") == 2
    # ... and a later repeat that is not an output reads it (the second neg below)
    j3 = plax.make_jaxpr(lambda v, w: (-lax.sin(v), (-lax.sin(v)) * w))(x, y).jaxpr
    merged3 = common_subexpressions(j3)
    assert [e.primitive.name for e in merged3.eqns] == ["sin", "neg", "mul"]
    assert merged3.eqns[2].invars[0] is merged3.outvars[0]


def test_rewritten_programs_equal_eager_on_a_fusing_backend():
    # the loss and its gradient, jitted on a backend that runs each cluster of the rewritten
    # program as one step (reference kernels), equal the eager values and a float64 reference
    backend = _FusingBackend(_fresh("fusing"), ())
    names = [plugins.register_plugin(type("P", (), {"plax_backends": hookimpl(
        lambda self: [backend])})(), name=backend.name)]
    try:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((5, 4)).astype(np.float32)
        y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 5)]
        f = plax.value_and_grad(_log_softmax_loss)
        (loss, g), (loss_e, g_e) = plax.jit(f, backend=backend.name)(x, y), f(x, y)
        np.testing.assert_allclose(np.asarray(loss), np.asarray(loss_e), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_e), rtol=1e-6, atol=1e-7)
        x64 = x.astype(np.float64)
        p = np.exp(x64 - x64.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(np.asarray(g), (p - y) / 5, rtol=1e-5, atol=1e-6)
        assert backend.emitters[0].clusters
        # a broadcast of a broadcast (axis 0 of v -> 1 -> 2) read by a fused chain
        v = np.arange(3, dtype=np.float32)
        h = lambda v: jnp.broadcast_to(jnp.broadcast_to(v, (2, 3)), (4, 2, 3)) * 2.0 + v  # noqa: E731
        np.testing.assert_array_equal(np.asarray(plax.jit(h, backend=backend.name)(v)),
                                      np.broadcast_to(v, (4, 2, 3)) * 3.0)
    finally:
        for n in names:
            plugins.unregister_plugin(n)


def test_a_view_keeps_its_base_from_being_overwritten_in_place():
    # ``y[1:]`` is a NumPy view of y; y's last reader, exp, may write its result into a dead
    # operand's buffer, and wrote into y while the view still read it (the first four
    # elements came out as 1 + exp(y[1:])): a view's operand lives as long as the view
    def f(x):
        y = jnp.sin(x) * 2.0
        return jnp.concatenate([y[1:], jnp.exp(y)]) + 1.0

    x = np.linspace(-1, 1, 5).astype(np.float32)
    y = np.sin(x.astype(np.float64)) * 2
    want = np.concatenate([y[1:], np.exp(y)]) + 1
    np.testing.assert_allclose(np.asarray(plax.jit(f, backend="numpy")(x)), want, rtol=1e-6)


def test_a_result_that_may_be_a_view_does_not_delay_its_operands_del():
    # a step not marked ``fresh_result`` (reshape here) may return a view of its operand:
    # only the reuse of the operand's buffer waits for the result; the operand is still
    # deleted after its last reader
    def f(x):
        a = jnp.sin(x)
        b = a.reshape(16)
        return jnp.cos(b).sum() + jnp.exp(b).sum()

    lines = [line.strip() for line in
             _numpy_program_source(f, np.ones((4, 4), np.float32)).splitlines()]
    assert lines[lines.index("v2 = _f1(v1)") + 1] == "del v1", lines
    assert not any("out=v1" in line for line in lines), lines


def _numpy_program_source(f, *args) -> str:
    from plax_numpy.backend import NumpyEmitter
    backend = plugins.registry().backends["numpy"]
    return lower(plax.make_jaxpr(f)(*args).jaxpr, NumpyEmitter(backend.impls), backend,
                 plax.devices("cpu")[0]).__plax_source__


def test_a_fresh_result_lets_its_operands_buffer_be_reused_in_place():
    # a product allocates its result (its kernel is marked fresh_result): ``a``'s buffer may
    # take cos's result while the product still lives, where a step that may return a view
    # would hold it, and the product's own new array may take the sum
    def f(x, w):
        a = jnp.exp(x)
        d = a @ w
        return d + jnp.cos(a)

    x = np.linspace(-1, 1, 16).reshape(4, 4).astype(np.float32)
    w = np.linspace(0, 2, 16).reshape(4, 4).astype(np.float32)
    lines = [line.strip() for line in _numpy_program_source(f, x, w).splitlines()]
    assert "v4 = _f2(v2, out=v2)" in lines, lines   # cos(a) into a's buffer
    assert "v5 = _f3(v3, v4, out=v3)" in lines, lines   # the sum into the product's new array
    a = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(plax.jit(f, backend="numpy")(x, w)),
                               a @ w + np.cos(a), rtol=1e-5)


def test_real_and_imag_are_views_not_ufunc_steps():
    # np.real/np.imag return views of a complex operand: a ufunc writing its result into the
    # operand's dead buffer changed them (real(y) came out as real(exp(y)))
    def f(z):
        y = z * 2
        return jnp.real(y), jnp.imag(y), jnp.exp(y)

    z = np.array([1 + 1j, 2 + 0.5j, 0.5 - 1j], np.complex64)
    for backend in ("numpy", "numba"):
        re, im, _ = plax.jit(f, backend=backend)(z)
        np.testing.assert_array_equal(np.asarray(re), (z * 2).real)
        np.testing.assert_array_equal(np.asarray(im), (z * 2).imag)

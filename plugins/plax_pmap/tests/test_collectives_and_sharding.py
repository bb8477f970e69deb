"""In one process (one device): the collectives under ``vmap(axis_name=...)`` against NumPy,
their JVP/transpose rules against finite differences, the sharding API of the core, and
plax without the plugin."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import (Mesh, NamedSharding, PartitionSpec as P, PositionalSharding,
                           SingleDeviceSharding)

rng = np.random.default_rng(1)
X = rng.standard_normal((4, 3)).astype(np.float32)


def vm(f, *args, **kw):
    return np.asarray(plax.vmap(f, axis_name="i", **kw)(*args))


# ------------------------------------------------------------------ vmap collectives

def test_vmap_reductions_match_numpy():
    np.testing.assert_allclose(vm(lambda x: lax.psum(x, "i"), X), np.broadcast_to(X.sum(0), X.shape),
                               rtol=1e-6)
    np.testing.assert_allclose(vm(lambda x: lax.pmean(x, "i"), X), np.broadcast_to(X.mean(0), X.shape),
                               rtol=1e-6)
    np.testing.assert_array_equal(vm(lambda x: lax.pmax(x, "i"), X), np.broadcast_to(X.max(0), X.shape))
    np.testing.assert_array_equal(vm(lambda x: lax.pmin(x, "i"), X), np.broadcast_to(X.min(0), X.shape))


def test_vmap_unbatched_operand_and_axis_index():
    np.testing.assert_array_equal(vm(lambda x: lax.psum(2.0, "i"), X), np.full(4, 8.0))
    np.testing.assert_array_equal(vm(lambda x: lax.axis_index("i"), X), np.arange(4))
    assert plax.vmap(lambda x: x * 0 + lax.axis_size("i"), axis_name="i")(X)[0, 0] == 4


def test_vmap_collective_over_an_outer_axis_passes_the_inner_batch_through():
    A = rng.standard_normal((2, 3, 5)).astype(np.float32)
    f = plax.vmap(plax.vmap(lambda x: lax.psum(x, "i"), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(f(A), np.broadcast_to(A.sum(0), A.shape), rtol=1e-6)
    g = plax.vmap(plax.vmap(lambda x: lax.all_gather(x, "i"), axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(np.asarray(g(A))[1, 2], A[:, 2])
    h = plax.vmap(plax.vmap(lambda x: lax.psum(x, ("i", "j")), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(h(A), np.broadcast_to(A.sum((0, 1)), A.shape), rtol=1e-5)


def test_vmap_data_movement_collectives():
    n = 4
    np.testing.assert_array_equal(vm(lambda x: lax.ppermute(x, "i", [(i, (i + 1) % n) for i in range(n)]), X),
                                  np.roll(X, 1, axis=0))
    np.testing.assert_array_equal(vm(lambda x: lax.pshuffle(x, "i", [3, 0, 1, 2]), X), X[[3, 0, 1, 2]])
    A = rng.standard_normal((n, n, 2)).astype(np.float32)
    np.testing.assert_array_equal(vm(lambda x: lax.all_to_all(x, "i", 0, 0), A), np.swapaxes(A, 0, 1))
    np.testing.assert_allclose(vm(lambda x: lax.psum_scatter(x, "i"), A), A.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(vm(lambda x: lax.all_gather(x, "i", axis=1), X),
                                  np.broadcast_to(X.T, (n, 3, n)))
    np.testing.assert_array_equal(vm(lambda x: lax.all_gather(x, "i", tiled=True), X),
                                  np.broadcast_to(X.reshape(-1), (n, 12)))


def test_jit_inside_vmap_stages_the_collective():
    f = plax.vmap(plax.jit(lambda x: lax.psum(x, "i") * lax.axis_index("i")), axis_name="i")
    np.testing.assert_allclose(f(X), X.sum(0)[None] * np.arange(4)[:, None], rtol=1e-6)
    text = str(plax.make_jaxpr(plax.vmap(lambda x: lax.psum(x, "i"), axis_name="i"))(X))
    assert "reduce_sum" in text



def _unbatched_programs():
    """Functions of a batched x whose collectives act on values vmap does not batch, inside
    programs (jit, cond, scan, while, checkpoint, grad): each with the same function
    written without the program around the collective, as the reference."""
    two = np.float32(2.0)
    return {
        "jit": (lambda x: x + plax.jit(lambda y: lax.psum(y, "i"))(two),
                lambda x: x + lax.psum(two, "i")),
        "jit_no_args": (lambda x: x + plax.jit(lambda: lax.axis_index("i"))(),
                        lambda x: x + lax.axis_index("i")),
        "nested_jit": (lambda x: x + plax.jit(lambda: plax.jit(
            lambda: lax.psum(1.0, "i"))())(), lambda x: x + lax.psum(1.0, "i")),
        "cond": (lambda x: x + lax.cond(True, lambda y: lax.psum(y, "i"), lambda y: y, two),
                 lambda x: x + lax.psum(two, "i")),
        "scan": (lambda x: x + lax.scan(lambda c, _: (c + lax.axis_index("i"), None), 0, None,
                                        length=3)[0],
                 lambda x: x + 3 * lax.axis_index("i")),
        "fori_loop": (lambda x: x + lax.fori_loop(0, 2, lambda k, c: c + lax.psum(1.0, "i"),
                                                  0.0),
                      lambda x: x + 2 * lax.psum(1.0, "i")),
        "checkpoint": (lambda x: x + plax.checkpoint(lambda y: lax.psum(y, "i"))(two),
                       lambda x: x + lax.psum(two, "i")),
        "grad_of_jit": (lambda x: x * plax.grad(plax.jit(lambda y: lax.psum(y * y, "i")))(two),
                        lambda x: x * plax.grad(lambda y: lax.psum(y * y, "i"))(two)),
    }


@pytest.mark.parametrize("name", list(_unbatched_programs()))
def test_program_around_a_collective_on_unbatched_values_runs_at_the_vmap_level(name):
    """The vmap level binding "i" processes a jit/cond/scan/while whose body uses "i" even
    when none of its operands is batched (JAX: psum of an unbatched 2.0 over 3 members is
    6.0): before, the call ran below the vmap and the collective had no kernel."""
    f, reference = _unbatched_programs()[name]
    v = np.arange(3, dtype=np.float32)
    expected = plax.vmap(reference, axis_name="i")(v)
    np.testing.assert_allclose(plax.vmap(f, axis_name="i")(v), expected, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.vmap(f, axis_name="i"))(v), expected, rtol=1e-6)
    # the reference itself against a Python loop over the members
    if name in ("jit", "cond", "checkpoint"):
        np.testing.assert_allclose(expected, v + 3 * 2.0)
    if name == "jit_no_args":
        np.testing.assert_array_equal(expected, v + np.arange(3))


def test_program_around_a_collective_over_an_outer_axis_only():
    """A jit using only the outer name runs at the outer level, under an inner vmap that
    leaves it alone; a jit using both names runs at the inner one."""
    a = np.ones((2, 3), np.float32)
    f = plax.vmap(plax.vmap(lambda z: z + plax.jit(lambda: lax.axis_index("i"))(),
                            axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(f(a), a + np.arange(2)[:, None])
    g = plax.vmap(plax.vmap(lambda z: z + plax.jit(lambda: lax.axis_index(("i", "j")))(),
                            axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(g(a), a + np.arange(6).reshape(2, 3))
    h = plax.vmap(plax.vmap(lambda z: z + plax.jit(lambda: lax.psum(1.0, "j"))(),
                            axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(h(a), a + 3)


def test_axis_names_of_looks_inside_programs():
    from plax.transforms.batching import axis_names_of
    closed = plax.make_jaxpr(lambda x: lax.cond(x > 0, lambda: lax.psum(x, "k"), lambda: x),
                             axis_env=[("k", 2)])(1.0)
    eqn = closed.jaxpr.eqns[-1]
    assert axis_names_of(eqn.primitive, eqn.params) == {"k"}
    plain = plax.make_jaxpr(lambda x: plax.jit(jnp.sin)(x))(1.0).jaxpr.eqns[-1]
    assert axis_names_of(plain.primitive, plain.params) == frozenset()


def test_make_jaxpr_axis_env_binds_names_for_collectives():
    text = str(plax.make_jaxpr(lambda x: lax.all_gather(x, "i"), axis_env=[("i", 4)])(1.0))
    assert "f32[4] = all_gather" in text
    with pytest.raises(NameError, match="unbound axis name: i"):
        plax.make_jaxpr(lambda x: lax.psum(x, "i"))(1.0)
    with pytest.raises(NameError, match="unbound axis name: j"):
        plax.make_jaxpr(lambda x: lax.psum(x, "j"), axis_env=[("i", 2)])(1.0)


def test_jit_traces_once_per_vmap_axis_size_and_name():
    """jit's trace cache is keyed by the named axes bound around it (the trace context)."""
    calls = []

    def body(x):
        calls.append(1)
        return lax.all_gather(x, "i")

    gather = plax.jit(body)
    for n in (2, 3, 2, 3):
        v = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(plax.vmap(gather, axis_name="i")(v),
                                      np.broadcast_to(v, (n, n)))
    assert len(calls) == 2  # one trace per size; the repeats hit the cache
    plain = []
    double = plax.jit(lambda x: plain.append(1) or x * 2)
    for n in (2, 3):
        plax.vmap(double)(jnp.ones(n))  # unnamed vmaps leave the context as it is
    assert len(plain) == 1
    with pytest.raises(NameError, match="unbound axis name: i"):
        plax.vmap(gather, axis_name="j")(jnp.ones(2))


def test_trace_context_holds_the_bound_axis_sizes():
    from plax.core import trace_context
    outside = trace_context()
    seen = []
    plax.vmap(lambda x: seen.append(trace_context()) or x, axis_name="i")(jnp.ones(3))
    assert seen[0] != outside and ("i", 3) in sum(seen[0], ())
    mesh = plax.make_mesh((1,), ("m",))
    plax.shard_map(lambda x: seen.append(trace_context()) or x, mesh=mesh, in_specs=P(),
                   out_specs=P())(jnp.ones(2))
    assert any((("m", 1),) in part for part in seen[-1])  # one frame: {"m": 1}
    assert trace_context() == outside


def test_collective_primitives_are_exported_under_jax_names():
    from plax_pmap import primitives
    names = ["psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p", "ppermute_p",
             "psum_scatter_p", "reduce_scatter_p", "axis_index_p"]
    for name in names:
        assert getattr(lax, name) is getattr(primitives, name), name
        assert isinstance(getattr(lax, name), plax.core.Primitive)
    assert lax.psum_p.name == "psum" and lax.reduce_scatter_p.name == "reduce_scatter"
    np.testing.assert_allclose(vm(lambda x: lax.psum_p.bind(x, axes=("i",)), X),
                               np.broadcast_to(X.sum(0), X.shape), rtol=1e-6)
    np.testing.assert_array_equal(
        vm(lambda x: lax.axis_index_p.bind(axes=("i",), axis_size=4) + 0 * x[0], X),
        np.arange(4))
    text = str(plax.make_jaxpr(plax.pmap(lambda x: lax.pmin_p.bind(x, axes=("i",)),
                                         axis_name="i"))(X[:1]))
    assert "reduce_min" in text


def test_discovery_exports_the_primitives_without_loading_the_rules():
    import subprocess
    import sys
    code = ("import sys, plax; p = plax.lax.psum_p; "
            "assert 'plax_pmap.collectives' not in sys.modules, 'rules loaded'; "
            "print(plax.vmap(lambda x: p.bind(x, axes=('i',)), axis_name='i')"
            "(plax.numpy.ones(3)).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[3.0, 3.0, 3.0]"

def _fd_check(f, x, rtol=2e-2, atol=2e-2):
    g = np.asarray(plax.grad(f)(x), np.float64)
    eps = 1e-3
    fd = np.zeros_like(g)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        fd[idx] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=rtol, atol=atol)


@pytest.mark.parametrize("body", [
    lambda x: lax.psum(jnp.sin(x), "i") * x,
    lambda x: lax.pmean(x * x, "i"),
    lambda x: lax.pmax(x, "i") * x,
    lambda x: lax.pmin(x, "i") + x,
    lambda x: lax.all_gather(x, "i")[1] * x,
    lambda x: lax.all_gather(x, "i", tiled=True)[2:5].sum() * x,
    lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]) * x,
    lambda x: jnp.tanh(lax.all_to_all(x.reshape(4, 1)[:, 0] if x.shape == (4,) else x, "i", 0, 0)),
    lambda x: lax.psum_scatter(x[:4] if x.shape[0] >= 4 else x, "i") * 2.0,
], ids=["psum", "pmean", "pmax", "pmin", "all_gather", "all_gather_tiled", "ppermute",
        "all_to_all", "psum_scatter"])
def test_collective_gradients_match_finite_differences(body):
    x = rng.standard_normal((4, 4)).astype(np.float32)

    def f(v):
        return jnp.sum(plax.vmap(body, axis_name="i")(v) ** 2)

    _fd_check(f, x)


def test_jvp_of_a_collective_under_vmap():
    t = np.ones_like(X)
    _, tan = plax.jvp(lambda x: plax.vmap(lambda r: lax.psum(r * r, "i"), axis_name="i")(x),
                      (X,), (t,))
    np.testing.assert_allclose(tan, np.broadcast_to((2 * X).sum(0), X.shape), rtol=1e-5)


# ------------------------------------------------------------------ errors

def test_unbound_axis_names_raise_name_error():
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(1.0, "i")
    with pytest.raises(NameError, match="unbound axis name: k"):
        plax.vmap(lambda x: lax.psum(x, "k"), axis_name="i")(X)
    with pytest.raises(NameError, match="unbound axis name: k"):
        plax.jit(lambda x: lax.all_gather(x, "k"))(X)


def test_collective_argument_errors():
    with pytest.raises(ValueError, match="sources and destinations must be unique"):
        vm(lambda x: lax.ppermute(x, "i", [(0, 1), (2, 1)]), X)
    with pytest.raises(ValueError, match="permutation"):
        vm(lambda x: lax.pshuffle(x, "i", [0, 0, 1, 2]), X)
    with pytest.raises(ValueError, match="must have the size of axis"):
        vm(lambda x: lax.psum_scatter(x, "i"), X)
    with pytest.raises(ValueError, match="axis_index_groups"):
        vm(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1], [2]]), X)  # 3 is missing
    with pytest.raises(ValueError, match="axis_index_groups"):
        vm(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1, 2], [3]]), X)  # unequal sizes


def test_vmap_groups_and_tuple_axes():
    got = vm(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 2], [1, 3]]), X)
    np.testing.assert_allclose(got, X[[0, 1, 0, 1]] + X[[2, 3, 2, 3]], rtol=1e-6)
    got = vm(lambda x: lax.all_gather(x, "i", axis_index_groups=[[3, 0], [1, 2]]), X)
    np.testing.assert_array_equal(got, X[[[3, 0], [1, 2], [1, 2], [3, 0]]])
    Y = rng.standard_normal((2, 2, 4)).astype(np.float32)   # positions a * 2 + b
    nest = lambda f: np.asarray(plax.vmap(plax.vmap(f, axis_name="b"), axis_name="a")(Y))  # noqa: E731
    flat = Y.reshape(4, 4)
    ring = [(k, (k + 1) % 4) for k in range(4)]
    np.testing.assert_array_equal(nest(lambda x: lax.ppermute(x, ("a", "b"), ring)),
                                  np.roll(flat, 1, axis=0).reshape(2, 2, 4))
    np.testing.assert_array_equal(nest(lambda x: lax.all_to_all(x, ("a", "b"), 0, 0)),
                                  flat.T.reshape(2, 2, 4))
    np.testing.assert_allclose(nest(lambda x: lax.psum_scatter(x, ("a", "b"))),
                               flat.sum(0).reshape(2, 2), rtol=1e-6)


# ------------------------------------------------------------------ the core's sharding API

def test_plain_array_sharding_attributes():
    x = jnp.ones((2, 3))
    d = plax.devices()[0]
    assert x.sharding == SingleDeviceSharding(d)
    assert x.is_fully_replicated and x.devices() == {d}
    (s,) = x.addressable_shards
    assert s.device == d and s.replica_id == 0


def test_mesh_specs_and_shardings():
    mesh = plax.make_mesh((1,), ("x",))
    assert mesh.shape == {"x": 1} and mesh.axis_names == ("x",)
    assert P("x", None) == P("x") and P("x") != ("x",)
    s = NamedSharding(mesh, P("x"))
    x = plax.device_put(np.arange(4.0), s)
    assert x.sharding.is_equivalent_to(s, 1) and x.is_fully_replicated
    with pytest.raises(ValueError, match="names axis 'y'"):
        NamedSharding(mesh, P("y"))
    with pytest.raises(ValueError, match="distinct"):
        Mesh(np.array(plax.devices() * 2).reshape(2, 1)[:, 0].reshape(2), ("a",)) \
            if len(plax.devices()) == 1 else Mesh(np.array(plax.devices()[:1]), ("a", "a"))


def test_positional_sharding():
    ps = PositionalSharding(plax.devices()[:1])
    assert ps.shape == (1,) and ps.is_fully_replicated
    assert ps.reshape(1, 1).shape == (1, 1)
    x = plax.device_put(np.ones((2, 2)), ps.reshape(1, 1))
    np.testing.assert_array_equal(x, np.ones((2, 2)))


def test_use_mesh_and_set_mesh():
    from plax.sharding import get_mesh, set_mesh, use_mesh
    # Auto: on an Explicit mesh shard_map demands arguments sharded as in_specs say
    mesh = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    assert get_mesh() is None
    with use_mesh(mesh):
        assert get_mesh() is mesh
        out = plax.shard_map(lambda b: b * 2, in_specs=P("x"), out_specs=P("x"))(jnp.ones(2))
        np.testing.assert_array_equal(out, [2.0, 2.0])
    assert get_mesh() is None
    with plax.set_mesh(mesh):
        assert get_mesh() is mesh
    assert get_mesh() is None
    set_mesh(mesh)
    try:
        assert get_mesh() is mesh
    finally:
        set_mesh(None)
    with pytest.raises(ValueError, match="needs a mesh"):
        plax.shard_map(lambda b: b, in_specs=P("x"), out_specs=P("x"))(jnp.ones(2))


def test_visualize_array_sharding_prints_a_table():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        plax.debug.visualize_array_sharding(jnp.ones((2, 2)))
    assert "CPU 0" in buf.getvalue() and buf.getvalue().startswith("┌")  # JAX's box


# ------------------------------------------------------------------ without the plugin

def test_absent_plugin_gives_a_clear_error_and_nothing_else_breaks(monkeypatch):
    from plax import plugins

    real = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda group: [ep for ep in real(group) if ep.name != "pmap"])
    plugins.reset()
    try:
        for get in (lambda: plax.pmap, lambda: plax.shard_map, lambda: plax.lax.psum,
                    lambda: plax.lax.axis_index):
            with pytest.raises(AttributeError, match="'plax-pmap', which is not installed"):
                get()
        with pytest.raises(AttributeError, match="pip install -e plugins/plax_pmap"):
            plax.pmap
        with pytest.raises(AttributeError, match="has no attribute 'not_a_collective'"):
            plax.lax.not_a_collective
        assert float(plax.jit(lambda x: jnp.cos(x))(0.0)) == 1.0
        assert plax.vmap(lambda x: x * 2, axis_name="i")(jnp.ones(2)).tolist() == [2.0, 2.0]
        assert plax.grad(lambda x: x ** 2)(3.0) == 6.0
        assert plax.make_mesh((1,), ("x",)).size == 1
    finally:
        monkeypatch.undo()
        plugins.reset()
    assert callable(plax.pmap)


# ------------------------------------------------------------------ plax.distributed

def test_distributed_initialize_single_process(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    plax.distributed.initialize()
    try:
        assert plax.distributed.is_initialized() and plax.process_count() == 1
        assert plax.local_devices() == plax.devices() and plax.process_index() == 0
        with pytest.raises(RuntimeError, match="only be called once"):
            plax.distributed.initialize()
    finally:
        plax.distributed.shutdown()
    with pytest.raises(RuntimeError, match="num_processes=2.*mpiexec -n 2"):
        plax.distributed.initialize(num_processes=2)
    assert not plax.distributed.is_initialized()


def test_mpiexec_without_initialize_or_without_the_transport(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(RuntimeError, match="initialize\\(\\) was not called"):
        plax.pmap(lambda x: x)(jnp.ones(1))
    from plax import plugins
    real = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda group: [ep for ep in real(group) if ep.name != "pmap"])
    plugins.reset()
    try:
        with pytest.raises(RuntimeError, match="plax_pmap\\[mpi\\]"):
            plax.distributed.initialize()
        assert not plax.distributed.is_initialized()
    finally:
        monkeypatch.undo()
        plugins.reset()


def test_experimental_shard_map_module_is_the_same_function():
    from plax.experimental.shard_map import shard_map
    mesh = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    assert shard_map(lambda b: b, mesh=mesh, in_specs=P("x"),
                     out_specs=P("x"))(jnp.ones(2)).tolist() == [1.0, 1.0]


class _MirrorTransport:
    """Two processes in one: the other process passes 10 times what this one does."""

    def allgather(self, local, timeout):
        return np.concatenate([local, 10 * local])


@pytest.fixture
def two_processes(monkeypatch):
    """This process as process 0 of a run of two, over :class:`_MirrorTransport`."""
    state = plax.distributed._state
    monkeypatch.setitem(state, "process_count", 2)
    monkeypatch.setitem(state, "process_index", 0)
    monkeypatch.setitem(state, "transport", _MirrorTransport())


@pytest.mark.filterwarnings("error::plax.lowering.PlaxFallbackWarning")
@pytest.mark.parametrize("backend", ["numpy", None])
def test_gather_processes_and_its_transpose(two_processes, backend):
    """gather_processes concatenates the processes' values in process order; its transpose
    sums every process's cotangent and keeps this process's block; eagerly, under jit on
    either backend, under grad, and under vmap."""
    from plax_pmap.processes import gather_processes, own_block
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    jit = (lambda f: plax.jit(f, backend=backend))
    for run in (lambda f: f, jit):
        np.testing.assert_array_equal(run(lambda v: gather_processes(v, 1))(x),
                                      np.concatenate([x, 10 * x], 1))
    w = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    loss = lambda v: jnp.sum(gather_processes(v, 0) * w)
    # every process's cotangent (w, and 10 w from the other) summed, this process's rows kept
    for g in (plax.grad(loss), jit(plax.grad(loss))):
        np.testing.assert_allclose(g(x), 11 * w[:2])
    _, t = plax.jvp(lambda v: gather_processes(v, 0), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t, np.concatenate([np.ones_like(x), 10 * np.ones_like(x)]))
    xs = np.stack([x, x + 1])
    np.testing.assert_array_equal(plax.vmap(lambda v: gather_processes(v, 1))(xs),
                                  np.stack([np.concatenate([v, 10 * v], 1) for v in xs]))
    np.testing.assert_array_equal(own_block(np.arange(8.0), 0, 4), np.arange(4.0))


def test_gather_processes_is_the_identity_in_one_process():
    from plax_pmap.processes import gather_processes, own_block
    x = jnp.ones((2, 3))
    assert gather_processes(x, 0) is x and own_block(x, 0, 2) is x

"""Checks run in a child interpreter with ``PLAX_NUM_CPU_DEVICES=N`` (devices are fixed when
plax starts): ``python multi_device_checks.py`` prints one JSON object, check name -> "ok" or
the failure. test_multi_device.py runs it for N = 2 and 4 and asserts each check."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import traceback

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import NamedSharding, PartitionSpec as P


def _auto_mesh(shape, names):
    """A mesh of Auto axes: these checks pass unsharded arguments to shard_map, which on an
    Explicit mesh (make_mesh's default) must already be sharded as in_specs say."""
    return plax.make_mesh(shape, names, axis_types=(plax.sharding.AxisType.Auto,) * len(names))


N = plax.device_count()
CHECKS: dict = {}
# discovery imported only the plugin's entry module; the implementation loads on first use
_LAZY = "plax_pmap.api" not in sys.modules and "plax_pmap.collectives" not in sys.modules


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                               atol=atol)


def raises(exc, fn, *match):
    try:
        fn()
    except exc as err:
        text = str(err) + " ".join(getattr(err, "__notes__", []))
        for m in match:
            assert m in text, f"{m!r} not in {text!r}"
        return err
    raise AssertionError(f"{exc.__name__} not raised")


rng = np.random.default_rng(0)
X = rng.standard_normal((N, 3)).astype(np.float32)


def both(f, *args, **kw):
    """pmap(f) on the devices, and the same as vmap(axis_name='i') (the reference path)."""
    got = plax.pmap(f, axis_name="i", **kw)(*args)
    ref = plax.vmap(f, axis_name="i", **{k: v for k, v in kw.items() if k in ("in_axes",)})(*args)
    return got, ref


@check
def devices_count():
    assert N == int(os.environ.get("PLAX_NUM_CPU_DEVICES", "1")) and len(plax.devices()) == N


@check
def plugin_loads_lazily():
    assert _LAZY or "pytest" in sys.modules  # (in-process, other tests may have used it)
    assert callable(plax.pmap) and callable(plax.lax.psum) and callable(plax.shard_map)


@check
def psum_pmean_pmax_pmin():
    for f, want in [(lambda x: lax.psum(x, "i"), X.sum(0)), (lambda x: lax.pmean(x, "i"), X.mean(0)),
                    (lambda x: lax.pmax(x, "i"), X.max(0)), (lambda x: lax.pmin(x, "i"), X.min(0))]:
        got, ref = both(f, X)
        close(got, np.broadcast_to(want, X.shape))
        close(ref, got)


@check
def large_psum_is_split_between_devices():
    # above 2**16 elements each device sums a block into one shared result
    B = rng.standard_normal((N, 3, 1 << 15)).astype(np.float32)
    got, ref = both(lambda x: lax.psum(x, "i") * 2.0, B)
    close(got, np.broadcast_to(2 * B.sum(0), B.shape), rtol=1e-5, atol=1e-5)
    close(ref, got)
    assert all(np.array_equal(np.asarray(s.data), np.asarray(got.addressable_shards[0].data))
               for s in got.addressable_shards)
    if N % 2 == 0:
        mesh = _auto_mesh((2, N // 2), ("a", "b"))
        C = rng.standard_normal((4, N * (1 << 15))).astype(np.float32)
        f = plax.shard_map(lambda c: lax.psum(c, "a"), mesh=mesh, in_specs=P("a", "b"),
                           out_specs=P(None, "b"))
        close(f(C), C[:2] + C[2:], rtol=1e-5, atol=1e-5)


@check
def psum_of_python_scalar_is_axis_size():
    got = plax.pmap(lambda x: lax.psum(1, "i"), axis_name="i")(X)
    assert np.asarray(got).tolist() == [N] * N


@check
def axis_index_and_size():
    got = plax.pmap(lambda x: lax.axis_index("i") + 0 * lax.axis_size("i"), axis_name="i")(X)
    assert np.asarray(got).tolist() == list(range(N))
    assert plax.pmap(lambda x: x * 0 + lax.axis_size("i"), axis_name="i")(X)[0, 0] == N


@check
def all_gather_variants():
    got, ref = both(lambda x: lax.all_gather(x, "i"), X)
    close(got, np.broadcast_to(X, (N,) + X.shape))
    close(ref, got)
    got, ref = both(lambda x: lax.all_gather(x, "i", axis=1), X)
    close(got, np.broadcast_to(X.T, (N, 3, N)))
    got, ref = both(lambda x: lax.all_gather(x, "i", tiled=True), X)
    close(got, np.broadcast_to(X.reshape(-1), (N, 3 * N)))
    close(ref, got)


@check
def all_to_all_variants():
    A = np.arange(N * N * 2, dtype=np.float32).reshape(N, N, 2)
    got, ref = both(lambda x: lax.all_to_all(x, "i", 0, 0), A)
    close(got, np.swapaxes(A, 0, 1))
    close(ref, got)
    T = np.arange(N * 2 * N, dtype=np.float32).reshape(N, 2 * N)
    got, ref = both(lambda x: lax.all_to_all(x, "i", 0, 0, tiled=True), T)
    want = np.stack([np.concatenate([T[i, 2 * j:2 * j + 2] for i in range(N)]) for j in range(N)])
    close(got, want)
    close(ref, got)


@check
def pswapaxes_is_all_to_all_on_one_axis():
    """pswapaxes(x, name, axis): member i's block j along ``axis`` goes to member j, in
    sender order (JAX's all_to_all(x, name, axis, axis)); under pmap, vmap and shard_map,
    and its gradient (the inverse swap)."""
    A = np.arange(N * 3 * N, dtype=np.float32).reshape(N, 3, N)
    got, ref = both(lambda x: lax.pswapaxes(x, "i", 1), A)
    close(got, np.transpose(A, (2, 1, 0)))  # out[j, k, i] = A[i, k, j]
    close(ref, got)
    mesh = _auto_mesh((N,), ("x",))
    B = np.arange(N * N, dtype=np.float32).reshape(N, N)
    f = plax.shard_map(lambda b: lax.pswapaxes(b, "x", 1), mesh=mesh, in_specs=P("x"),
                       out_specs=P("x"))
    close(f(B), B.T)
    W = rng.standard_normal((N, N)).astype(np.float32)
    close(plax.grad(lambda b: jnp.sum(f(b) * W))(B), W.T)
    raises(ValueError, lambda: both(lambda x: lax.pswapaxes(x, "i", 0), A), "split_axis")


@check
def pcast_to_varying_matches_jax():
    """pcast(x, name, to="varying") (JAX 0.10's pvary): values and gradients as JAX gives
    them (checked against JAX 0.10.2: 2*N*c, and grad 2*N), the result typed as varying, a
    cast of a value that already varies raises ValueError as in JAX, and JAX's
    reduced/unreduced targets raise NotImplementedError."""
    mesh = _auto_mesh((N,), ("x",))
    c = np.full(2, 1.5, np.float32)
    pv = lambda v: lax.pcast(v, "x", to="varying")
    f = plax.shard_map(lambda c: lax.psum(pv(c) * 2.0, "x"), mesh=mesh, in_specs=P(),
                       out_specs=P())
    close(f(c), 2.0 * N * c)
    for g in (plax.grad(lambda c: f(c).sum()), plax.jit(plax.grad(lambda c: f(c).sum()))):
        close(g(c), np.full(2, 2.0 * N))
    xs = np.arange(2.0 * N, dtype=np.float32)
    h = plax.shard_map(lambda c, x: lax.psum((pv(c) * x).sum(), "x"), mesh=mesh,
                       in_specs=(P(), P("x")), out_specs=P())
    close(plax.grad(h)(c, xs), xs.reshape(N, 2).sum(0))
    again = plax.shard_map(pv, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    raises(ValueError, lambda: again(xs), "already varies")
    # the cast is typed: a varying value cannot go to an entry that leaves the axis out
    # (JAX raises too), and in the body its type says it varies
    leaky = plax.shard_map(pv, mesh=mesh, in_specs=P(), out_specs=P())
    raises(ValueError, lambda: leaky(c), "leaves out mesh axis 'x'")
    raises(ValueError, lambda: plax.jit(leaky)(c), "leaves out mesh axis 'x'")
    seen = []
    plax.shard_map(lambda v: seen.append(plax.typeof(pv(v)).vma) or pv(v), mesh=mesh,
                   in_specs=P(), out_specs=P("x"))(c)
    assert seen == [frozenset({"x"})], seen
    # inside the body, grad through the cast sums over the devices (its transpose is psum)
    inner = plax.shard_map(lambda v, b: plax.grad(lambda v: (pv(v) * b).sum())(v),
                           mesh=mesh, in_specs=(P(), P("x")), out_specs=P())
    close(inner(c, xs), xs.reshape(N, 2).sum(0))
    scan_cast = plax.shard_map(
        lambda v, b: lax.psum(lax.scan(lambda h, r: (h + r * b, None), pv(v),
                                       jnp.arange(3.0))[0], "x"),
        mesh=mesh, in_specs=(P(), P("x")), out_specs=P())
    close(scan_cast(c, xs), N * c + 3 * xs.reshape(N, 2).sum(0))
    for to in ("reduced", "unreduced"):
        raises(NotImplementedError, lambda: plax.shard_map(
            lambda v: lax.pcast(v, "x", to=to), mesh=mesh, in_specs=P(), out_specs=P())(c),
            "reduced/unreduced")
    raises(ValueError, lambda: plax.vmap(lambda v: lax.pcast(v, "i", to="vary"),
                                         axis_name="i")(xs), "not one of")
    raises(TypeError, lambda: plax.vmap(lambda v: lax.pcast(v, {"i"}, to="varying"),
                                        axis_name="i")(xs), "set")
    raises(NameError, lambda: lax.pcast(c, "nope", to="varying"), "nope")


@check
def independent_collectives_share_one_exchange():
    """Collectives that do not depend on each other run as one group (one exchange, one
    barrier): a pmean of a pytree, and a mix of kinds with a large (block-wise) psum, an
    axis_index and one collective that reads another's result (the next group). Values
    against vmap(axis_name=...)."""
    from plax_pmap import runtime
    big = rng.standard_normal((N, 1 << 16)).astype(np.float32)

    def f(x, b):
        s = lax.psum(x, "i")
        m, g = lax.pmax(x * 2.0, "i"), lax.all_gather(x[0], "i")
        i = lax.axis_index("i")
        total = lax.psum(b, "i")        # >= 2**16 elements: summed block-wise
        again = lax.psum(s * i, "i")    # reads s: must wait for the first group
        return s, m, g, total, again

    jaxpr = plax.make_jaxpr(f, axis_env=[("i", N)])(X[0], big[0]).jaxpr
    groups = [u for u in runtime._schedule(jaxpr.eqns, set()) if isinstance(u, list)]
    names = [sorted(e.primitive.name for e in g) for g in groups]
    assert names == [["all_gather", "axis_index", "pmax", "psum", "psum"], ["psum"]], names
    got, ref = both(f, X, big)
    for a, b in zip(got, ref):
        close(a, b, rtol=1e-5, atol=1e-4)
    tree = {"w": X, "b": X[:, :1], "c": big}
    got, ref = both(lambda t: lax.pmean(t, "i"), tree)
    for k in tree:
        close(got[k], ref[k], rtol=1e-5, atol=1e-5)
        close(got[k], np.broadcast_to(tree[k].mean(0), tree[k].shape), rtol=1e-5, atol=1e-5)


@check
def custom_derivatives_with_collectives_inside_shard_map():
    """custom_jvp/custom_vjp functions holding a psum: typed by their body (the result is
    replicated, so out_specs=P() accepts it), and differentiated from outside the shard_map
    the bwd rule gets the cotangent of a replicated output as JAX gives it (the same on each
    device). Values and gradients as JAX 0.10.2 gives them; a bwd rule returning a varying
    cotangent for a replicated argument is JAX's ValueError."""
    mesh = _auto_mesh((N,), ("x",))

    @plax.custom_vjp
    def total(v):
        return lax.psum(v, "x")
    total.defvjp(lambda v: (total(v), None), lambda _, g: (lax.pcast(g, "x", to="varying"),))

    @plax.custom_jvp
    def total2(v):
        return lax.psum(v, "x")
    total2.defjvp(lambda p, t: (total2(p[0]), lax.psum(t[0], "x")))
    xs = np.arange(2.0 * N, dtype=np.float32)
    want = xs.reshape(N, 2).sum(0)
    for fn in (total, total2):
        sm = plax.shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=P())
        close(sm(xs), want)
        close(plax.jit(sm)(xs), want)
        for g in (plax.grad(lambda v: sm(v).sum()), plax.jit(plax.grad(lambda v: sm(v).sum()))):
            close(g(xs), np.ones_like(xs))

    @plax.custom_vjp
    def scaled(w, b):
        return w * b
    scaled.defvjp(lambda w, b: (scaled(w, b), (w, b)), lambda r, g: (g * r[1], g * r[0]))
    w = np.float32([1.5, 2.0])
    bad = plax.shard_map(lambda w, b: lax.psum(scaled(w, b), "x"), mesh=mesh,
                         in_specs=(P(), P("x")), out_specs=P())
    raises(ValueError, lambda: plax.grad(lambda w: bad(w, xs).sum())(w), "bwd rule")

    @plax.custom_vjp
    def scaled_ok(w, b):
        return w * b
    scaled_ok.defvjp(lambda w, b: (scaled_ok(w, b), (w, b)),
                     lambda r, g: (lax.psum(g * r[1], "x"), g * r[0]))
    good = plax.shard_map(lambda w, b: lax.psum(scaled_ok(w, b), "x"), mesh=mesh,
                          in_specs=(P(), P("x")), out_specs=P())
    close(plax.grad(lambda w: good(w, xs).sum())(w), want)


@check
def psum_scatter_variants():
    A = rng.standard_normal((N, N, 2)).astype(np.float32)
    got, ref = both(lambda x: lax.psum_scatter(x, "i"), A)
    close(got, A.sum(0))
    close(ref, got)
    B = rng.standard_normal((N, 2 * N)).astype(np.float32)
    got, ref = both(lambda x: lax.psum_scatter(x, "i", tiled=True), B)
    close(got, B.sum(0).reshape(N, 2))
    close(ref, got)


@check
def ppermute_and_pshuffle():
    ring = [(i, (i + 1) % N) for i in range(N)]
    got, ref = both(lambda x: lax.ppermute(x, "i", ring), X)
    close(got, np.roll(X, 1, axis=0))
    close(ref, got)
    got, ref = both(lambda x: lax.ppermute(x, "i", [(0, N - 1)]), X)
    want = np.zeros_like(X)
    want[N - 1] = X[0]
    close(got, want)
    perm = [(i + 1) % N for i in range(N)]
    got, ref = both(lambda x: lax.pshuffle(x, "i", perm), X)
    close(got, X[perm])


@check
def outputs_stay_sharded():
    y = plax.pmap(lambda x: x * 2.0)(X)
    assert len(y.devices()) == N and not (N > 1 and y.is_fully_replicated)
    shards = y.addressable_shards
    assert [s.device for s in shards] == plax.devices()
    for i, s in enumerate(shards):
        close(s.data, 2 * X[i])
    # a sharded result feeds the next pmap without gathering, and ordinary ops still work
    z = plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(y)
    close(z, np.broadcast_to(2 * X.sum(0), X.shape))
    close(y + 1.0, 2 * X + 1.0)


@check
def seed_pmap_add_ints():
    x = jnp.arange(N)
    out = plax.pmap(jnp.add)(x, x)
    assert out.dtype == np.int32 and np.asarray(out).tolist() == [2 * i for i in range(N)]


@check
def in_axes_out_axes_static_kwargs_pytrees():
    W = rng.standard_normal((3,)).astype(np.float32)
    f = plax.pmap(lambda x, w: x * w, in_axes=(0, None))
    close(f(X, W), X * W)
    close(plax.pmap(lambda x: x + 1, in_axes=1)(X.T), X + 1)
    close(plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i", out_axes=None)(X), X.sum(0))
    close(plax.pmap(lambda x: x * 3, out_axes=1)(X), (X * 3).T)
    g = plax.pmap(lambda x, n: x * n, static_broadcasted_argnums=1)
    close(g(X, 3), X * 3)
    close(plax.pmap(lambda d: d["a"] - d["b"][0])({"a": X, "b": (X,)}), 0 * X)
    close(plax.pmap(lambda x, *, s: x * s)(X, s=jnp.full((N,), 2.0))[:, 0], 2 * X[:, 0])
    out = plax.pmap(lambda x: (x, {"s": x.sum()}))(X)
    close(out[1]["s"], X.sum(1))
    close(plax.pmap(lambda x: x, devices=plax.devices()[::-1])(X), X)
    close(plax.pmap(lambda x: x, backend="numpy", donate_argnums=0)(X), X)


@check
def nested_names_and_tuple_axes():
    if N % 2:
        return
    A = rng.standard_normal((2, N // 2, 3)).astype(np.float32)
    f = plax.pmap(plax.pmap(lambda x: lax.psum(x, ("i", "j")), axis_name="j"), axis_name="i")
    close(f(A), np.broadcast_to(A.sum((0, 1)), A.shape))
    g = plax.pmap(lambda x: plax.vmap(lambda y: lax.psum(y, "i") + lax.axis_index("j"),
                                      axis_name="j")(x), axis_name="i")
    close(g(A), np.broadcast_to(A.sum(0)[None] + np.arange(N // 2)[None, :, None], A.shape))
    h = plax.pmap(lambda x: plax.vmap(lambda y: lax.all_gather(y, ("i", "j")), axis_name="j")(x),
                  axis_name="i")
    close(h(A)[1, 0], A.reshape(N, 3))
    k = plax.pmap(lambda x: plax.vmap(lambda y: lax.axis_index(("i", "j")), axis_name="j")(x),
                  axis_name="i")
    assert np.asarray(k(A)).reshape(-1).tolist() == list(range(N))


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


@check
def pmap_of_grad_is_data_parallel_training():
    W = rng.standard_normal((3, 2)).astype(np.float32)
    B = rng.standard_normal((N, 4, 3)).astype(np.float32)

    def step(w, x):
        g = plax.grad(loss)(w, x)
        return w - 0.1 * lax.pmean(g, "i")

    got = plax.pmap(step, axis_name="i", in_axes=(None, 0))(W, B)
    want = W - 0.1 * plax.grad(loss)(W, B.reshape(-1, 3)) / N
    for i in range(N):
        close(got[i], want, rtol=1e-4, atol=1e-5)


@check
def grad_of_pmap_matches_finite_differences():
    def f(x):
        y = plax.pmap(lambda v: lax.psum(jnp.sin(v) * v, "i") * lax.all_gather(v, "i")[0],
                      axis_name="i")(x)
        return jnp.sum(y)

    x = X.astype(np.float32)
    g = np.asarray(plax.grad(f)(x), np.float64)
    eps = 1e-3
    fd = np.zeros_like(g)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        fd[idx] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=2e-2, atol=2e-2)


@check
def jit_and_vmap_inside_pmap_and_pmap_inside_jit():
    f = plax.pmap(plax.jit(lambda x: lax.psum(x * 2, "i")), axis_name="i")
    close(f(X), np.broadcast_to(2 * X.sum(0), X.shape))
    g = plax.pmap(lambda x: plax.vmap(lambda r: r * lax.axis_index("i"))(x), axis_name="i")
    close(g(X), X * np.arange(N)[:, None])
    h = plax.jit(plax.pmap(lambda x: lax.pmax(x, "i"), axis_name="i"))
    close(h(X), np.broadcast_to(X.max(0), X.shape))


@check
def composition_matrix():
    """Each of jit, grad, vmap around and inside pmap and shard_map, against the same
    function written without devices."""
    A = rng.standard_normal((N, 3)).astype(np.float32)
    ref_f = lambda a: jnp.sum(jnp.sin(a) * jnp.sum(a, axis=0))          # noqa: E731
    per = lambda r: jnp.sum(jnp.sin(r) * lax.psum(r, "i"))              # noqa: E731
    pm = lambda a: jnp.sum(plax.pmap(per, axis_name="i")(a))            # noqa: E731
    mesh = _auto_mesh((N,), ("i",))
    sm = lambda a: plax.shard_map(lambda b: lax.psum(jnp.sum(jnp.sin(b) * lax.psum(b, "i")), "i"),
                                  mesh=mesh, in_specs=P("i"), out_specs=P())(a)  # noqa: E731
    want, want_g = ref_f(A), plax.grad(ref_f)(A)
    for f in (pm, sm):
        close(f(A), want, rtol=1e-4)
        close(plax.jit(f)(A), want, rtol=1e-4)
        close(plax.grad(f)(A), want_g, rtol=1e-4, atol=1e-4)
        close(plax.jit(plax.grad(f))(A), want_g, rtol=1e-4, atol=1e-4)
        close(plax.vmap(f)(np.stack([A, 2 * A])), [want, ref_f(2 * A)], rtol=1e-4)
    # transforms inside: grad and vmap and jit per device
    g = plax.pmap(plax.grad(per), axis_name="i")(A)
    close(g, plax.vmap(plax.grad(per), axis_name="i")(A), rtol=1e-5)
    g2 = plax.shard_map(plax.grad(lambda b: jnp.sum(jnp.sin(b) * lax.psum(b, "i"))), mesh=mesh,
                        in_specs=P("i"), out_specs=P("i"))(A)
    close(g2, g, rtol=1e-5)
    v = plax.pmap(plax.vmap(lambda r: r * lax.axis_index("i")), axis_name="i")(A[:, :, None])
    close(v, A[:, :, None] * np.arange(N)[:, None, None])


@check
def shard_map_one_axis():
    mesh = _auto_mesh((N,), ("x",))
    A = rng.standard_normal((2 * N, 3)).astype(np.float32)
    f = plax.shard_map(lambda b: lax.psum(b.sum(0), "x"), mesh=mesh, in_specs=P("x"),
                       out_specs=P())
    close(f(A), A.sum(0), rtol=1e-4)
    g = plax.shard_map(lambda b: b * (lax.axis_index("x") + 1), mesh=mesh, in_specs=(P("x"),),
                       out_specs=P("x"))
    out = g(A)
    close(out, A * np.repeat(np.arange(1, N + 1), 2)[:, None])
    assert out.sharding == NamedSharding(mesh, P("x"))
    with plax.sharding.use_mesh(mesh):
        close(plax.shard_map(lambda b: b + 1, in_specs=P("x"), out_specs=P("x"))(A), A + 1)


@check
def shard_map_two_axes():
    if N % 2:
        return
    mesh = _auto_mesh((2, N // 2), ("data", "model"))
    A = rng.standard_normal((4, 2 * N)).astype(np.float32)
    f = plax.shard_map(lambda b: lax.psum(b, "data"), mesh=mesh, in_specs=P("data", "model"),
                       out_specs=P(None, "model"))
    close(f(A), A[:2] + A[2:])
    # (all_gather's result counts as varying, as in JAX: out_specs=P() needs check_vma=False)
    g = plax.shard_map(lambda b: lax.all_gather(b, ("data", "model"), tiled=True), mesh=mesh,
                       in_specs=P(("data", "model")), out_specs=P(), check_vma=False)
    v = rng.standard_normal((2 * N,)).astype(np.float32)
    close(g(v), v)
    x = plax.device_put(A, NamedSharding(mesh, P("data", "model")))
    assert len(x.addressable_shards) == N
    close(f(x), A[:2] + A[2:])
    ref = plax.jit(f)(A)  # under jit: the vmap formulation
    close(ref, A[:2] + A[2:])


@check
def axis_index_groups_on_devices():
    """psum/pmean/pmax/pmin/all_gather/psum_scatter/all_to_all within groups, on the devices
    and under vmap, against NumPy (groups of two: pairs (0, N-1), (1, N-2), ...)."""
    if N % 2:
        return
    groups = [[k, N - 1 - k] for k in range(N // 2)]
    partner = {a: b for a, b in groups} | {b: a for a, b in groups}
    pair = np.array([X[i] + X[partner[i]] for i in range(N)])
    for f, want in [
            (lambda x: lax.psum(x, "i", axis_index_groups=groups), pair),
            (lambda x: lax.pmean(x, "i", axis_index_groups=groups), pair / 2),
            (lambda x: lax.pmax(x, "i", axis_index_groups=groups),
             np.array([np.maximum(X[i], X[partner[i]]) for i in range(N)])),
            (lambda x: lax.pmin(x, "i", axis_index_groups=groups),
             np.array([np.minimum(X[i], X[partner[i]]) for i in range(N)]))]:
        got, ref = both(f, X)
        close(got, want)
        close(ref, want)
    members = {i: g for g in groups for i in g}
    got, ref = both(lambda x: lax.all_gather(x, "i", axis_index_groups=groups), X)
    want = np.array([X[members[i]] for i in range(N)])
    close(got, want)
    close(ref, want)
    Y = rng.standard_normal((N, 2, 3)).astype(np.float32)   # a dimension of the group's size
    rank = {i: members[i].index(i) for i in range(N)}
    got, ref = both(lambda x: lax.psum_scatter(x, "i", axis_index_groups=groups), Y)
    want = np.array([Y[members[i]].sum(0)[rank[i]] for i in range(N)])
    close(got, want)
    close(ref, want)
    got, ref = both(lambda x: lax.all_to_all(x, "i", 0, 0, axis_index_groups=groups), Y)
    want = np.array([Y[members[i]][:, rank[i]] for i in range(N)])
    close(got, want)
    close(ref, want)
    g = plax.grad(lambda w: plax.pmap(lambda x: lax.psum(x * w, "i", axis_index_groups=groups),
                                      axis_name="i")(X).sum())(np.float32(2.0))
    close(g, 2 * X.sum(), rtol=1e-4)
    raises(ValueError, lambda: both(lambda x: lax.psum(x, "i", axis_index_groups=[[0]]), X),
           "axis_index_groups")


@check
def collectives_over_two_mesh_axes():
    """all_to_all, psum_scatter and ppermute over ("data", "model") act on the axes' product,
    the first name major (as JAX's), under shard_map on a 2 x N/2 mesh and under jit."""
    if N % 2:
        return
    mesh = _auto_mesh((2, N // 2), ("data", "model"))
    axes = ("data", "model")
    A = rng.standard_normal((N, N)).astype(np.float32)   # row p: member p's block

    def sm(f):
        return plax.shard_map(f, mesh=mesh, in_specs=P(axes), out_specs=P(axes))
    ring = [(k, (k + 1) % N) for k in range(N)]
    want = np.roll(A, 1, axis=0)
    close(sm(lambda b: lax.ppermute(b, axes, ring))(A), want)
    close(plax.jit(sm(lambda b: lax.ppermute(b, axes, ring)))(A), want)
    close(sm(lambda b: lax.all_to_all(b, axes, 1, 1, tiled=True))(A), A.T)
    close(sm(lambda b: lax.psum_scatter(b, axes, scatter_dimension=1, tiled=True))(A),
          A.sum(0)[:, None])
    g = plax.grad(lambda a: (sm(lambda b: lax.ppermute(b, axes, ring))(a) * A).sum())(A)
    close(g, np.roll(A, -1, axis=0))


@check
def each_device_gets_its_share_of_the_cores():
    """On N > 1 CPU devices every device thread runs inside its backend's
    ``threads_limited(cores // N)`` (at least 1)."""
    if N == 1:
        return
    backend = plax.devices()[0].backend
    cls = type(backend)
    seen = []
    original = cls.threads_limited

    def recording(self, n):
        seen.append((threading.get_ident(), n))
        return original(self, n)
    cls.threads_limited = recording
    try:
        close(plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(X),
              np.broadcast_to(X.sum(0), X.shape))
    finally:
        cls.threads_limited = original
    assert len(seen) == N and len({t for t, _ in seen}) == N, seen
    assert {n for _, n in seen} == {max(1, (os.cpu_count() or 1) // N)}, seen


@check
def shard_map_under_grad_and_jit():
    mesh = _auto_mesh((N,), ("x",))
    W = rng.standard_normal((3,)).astype(np.float32)
    A = rng.standard_normal((2 * N, 3)).astype(np.float32)

    def total(w, a):
        per = plax.shard_map(lambda w_, b: lax.psum(jnp.sum(jnp.tanh(b @ w_)), "x"), mesh=mesh,
                             in_specs=(P(), P("x")), out_specs=P())
        return per(w, a)

    want = plax.grad(lambda w: jnp.sum(jnp.tanh(A @ w)))(W)
    close(plax.grad(total)(W, A), want, rtol=1e-4)
    close(plax.jit(plax.grad(total))(W, A), want, rtol=1e-4)
    close(plax.jit(total)(W, A), np.tanh(A @ W).sum(), rtol=1e-4)



def _typed_variants(body, in_specs, out_specs, *args):
    """``body`` under shard_map, eager (the per-device program) and under jit (the nested
    vmaps), with check_vma on: the two formulations must type alike."""
    mesh = _auto_mesh((N,), ("x",))
    f = plax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    return f(*args), plax.jit(f)(*args)


@check
def shard_map_typed_grad_through_psum():
    """check_vma types values by the mesh axes they vary over (JAX's rules): psum of a value
    that varies over the axis transposes to the identity; untyped, psum transposes to psum."""
    A = rng.standard_normal((2 * N, 3)).astype(np.float32)
    body = plax.grad(lambda b: lax.psum(jnp.sum(b * b), "x"))
    for got in _typed_variants(body, P("x"), P("x"), A):
        close(got, 2 * A)
    mesh = _auto_mesh((N,), ("x",))
    untyped = plax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                             check_vma=False)
    close(untyped(A), 2 * N * A)
    # a replicated value is implicitly broadcast: the gradient sums over the devices
    v = rng.standard_normal((3,)).astype(np.float32)
    for got in _typed_variants(plax.grad(lambda w: lax.psum(jnp.sum(w * w), "x")), P(), P(),
                               v):
        close(got, 2 * N * v)


def _mlp_loss(w, b):
    return jnp.mean(jnp.tanh(b @ w) ** 2)


@check
def shard_map_typed_grad_wrt_replicated_parameters():
    """The gradient of a pmean-ed loss with respect to replicated parameters is the mean of
    the devices' gradients (replicated: out_specs=P() accepts it); of a local loss, their
    sum; also through jit, cond and scan inside the differentiated function."""
    W = rng.standard_normal((3, 2)).astype(np.float32)
    B = rng.standard_normal((4 * N, 3)).astype(np.float32)
    blocks = B.reshape(N, 4, 3)
    per_device = [np.asarray(plax.grad(_mlp_loss)(W, blocks[d])) for d in range(N)]
    mean = np.mean(per_device, axis=0)
    losses = {
        "plain": _mlp_loss,
        "jit": plax.jit(_mlp_loss),
        "cond": lambda w, b: lax.cond(True, _mlp_loss, lambda w, b: 0.0, w, b),
        "scan": lambda w, b: lax.scan(lambda c, r: (c + _mlp_loss(w, r[None]) / 4, None),
                                      0.0, b)[0],
    }
    for name, loss in losses.items():
        body = lambda w, b, loss=loss: plax.grad(lambda w: lax.pmean(loss(w, b), "x"))(w)
        for got in _typed_variants(body, (P(), P("x")), P(), W, B):
            close(got, mean, rtol=1e-4, atol=1e-6)
    local = lambda w, b: plax.grad(_mlp_loss)(w, b)
    for got in _typed_variants(local, (P(), P("x")), P(), W, B):
        close(got, N * mean, rtol=1e-4, atol=1e-6)
    # untyped: each device's own gradient (pmean transposes to a mean of equal cotangents)
    mesh = _auto_mesh((N,), ("x",))
    untyped = plax.shard_map(
        lambda w, b: plax.grad(lambda w: lax.pmean(_mlp_loss(w, b), "x"))(w)[None],
        mesh=mesh, in_specs=(P(), P("x")), out_specs=P("x"), check_vma=False)
    close(untyped(W, B), np.stack(per_device), rtol=1e-4, atol=1e-6)


@check
def shard_map_typed_grad_through_data_movement():
    """all_gather and ppermute of a replicated value: the cotangent reaching it varies and
    is summed over the devices (the transpose of JAX's implicit pvary)."""
    p = rng.standard_normal((2,)).astype(np.float32)
    A = rng.standard_normal((N, 3)).astype(np.float32)
    s = A.sum(1)  # each device's block sum
    body = lambda w, b: plax.grad(
        lambda w: jnp.sum(lax.all_gather(w * 2.0, "x", tiled=True) * jnp.sum(b)))(w)
    for got in _typed_variants(body, (P(), P("x")), P(), p, A):
        close(got, np.full(2, 2.0 * N * s.sum()), rtol=1e-4)
    perm = [(i, (i + 1) % N) for i in range(N)]
    body = lambda w, b: plax.grad(lambda w: jnp.sum(lax.ppermute(w * jnp.sum(b), "x", perm)
                                                    ** 2))(w)[None]
    # device d receives w * s[d - 1]: d/dw of its square summed, then summed over devices
    want = np.stack([2 * p * s[(d - 1) % N] ** 2 for d in range(N)]).sum(0)
    for got in _typed_variants(body, (P(), P("x")), P("x"), p, A):
        close(np.asarray(got)[0], want, rtol=1e-4)


@contextlib.contextmanager
def _env(**variables: str):
    """The environment variables set for the block (read when a call is prepared or run)."""
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in variables:
            os.environ.pop(name)


def _threaded_control_flow():
    return _env(PLAX_PMAP_THREADED_CONTROL_FLOW="1")


@check
def collectives_inside_control_flow():
    """cond/switch, scan (forward and reverse, with ys), fori_loop, while_loop, nesting, grad
    and jit around them, with collectives in the bodies, under pmap and shard_map: in one
    process as one-thread vmap (the default), and run by the device threads (as across
    processes); values against vmap(axis_name=...)."""
    cases = {
        "fori": lambda x: lax.fori_loop(0, 3, lambda i, c: c + lax.psum(x * i, "i"),
                                        jnp.zeros_like(x)),
        "scan": lambda x: lax.scan(lambda c, r: (c + lax.psum(r, "i"),
                                                 c * lax.axis_index("i")), 0.0, x)[0],
        "scan_ys_reverse": lambda x: lax.scan(lambda c, r: (c + lax.psum(r, "i"),
                                                            c * lax.axis_index("i")),
                                              0.0, x, reverse=True)[1],
        "cond": lambda x: lax.cond(x.sum() > -1e9, lambda: lax.psum(x, "i"), lambda: x),
        "switch": lambda x: lax.switch(1, [lambda: x, lambda: lax.pmax(x, "i"), lambda: -x]),
        "while": lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (
            c[0] + 1, lax.pmean(c[1] * 2, "i")), (0, x))[1],
        "nested": lambda x: lax.fori_loop(0, 2, lambda i, c: lax.cond(
            i > 0, lambda: c + lax.psum(c, "i"), lambda: c * 2), x),
        "grad": lambda x: plax.grad(lambda x: lax.scan(lambda c, r: (
            c + lax.psum(jnp.sin(r * x), "i"), None), jnp.zeros(3), jnp.arange(3.0))[0].sum())(x),
        "jit": lambda x: plax.jit(lambda x: lax.fori_loop(
            0, 2, lambda i, c: c + lax.psum(x, "i"), x))(x),
    }
    mesh = _auto_mesh((N,), ("i",))
    for threaded in (False, True):
        with _threaded_control_flow() if threaded else contextlib.nullcontext():
            for name, f in cases.items():
                want = plax.vmap(f, axis_name="i")(X)
                close(plax.pmap(f, axis_name="i")(X), want)
                sm = plax.shard_map(lambda b: f(b[0])[None], mesh=mesh, in_specs=P("i"),
                                    out_specs=P("i"), check_vma=False)
                close(sm(X), want)
    threads = set()

    def seen(v):
        threads.add(threading.get_ident())
        return v

    def body(i, c):
        c = plax.pure_callback(seen, plax.ShapeDtypeStruct(c.shape, c.dtype), c)
        return c + lax.psum(c, "i")

    with _threaded_control_flow():
        got = plax.pmap(lambda x: lax.fori_loop(0, 2, body, x), axis_name="i")(X)
    close(got, plax.vmap(lambda x: lax.fori_loop(0, 2, lambda i, c: c + lax.psum(c, "i"), x),
                         axis_name="i")(X))
    assert len(threads) == N, threads  # one thread per device, none of them vmap's
    if N > 1:
        # an index that differs between devices: only some reach the psum
        with _env(PLAX_COLLECTIVE_TIMEOUT="0.5", PLAX_PMAP_THREADED_CONTROL_FLOW="1"):
            raises(TimeoutError, lambda: plax.pmap(lambda x: lax.cond(
                lax.axis_index("i") == 0, lambda: lax.psum(x, "i"), lambda: x),
                axis_name="i")(X), "timed out")


@check
def bad_input_errors():
    raises(ValueError, lambda: plax.pmap(lambda x, y: x + y)(jnp.ones((N, 2)), jnp.ones((N + 1, 2))),
           "inconsistent sizes", "args[1]")
    raises(ValueError, lambda: plax.pmap(lambda x: x)(jnp.ones((N + 1, 2))),
           f"requires {N + 1} devices", f"only {N}")
    raises(NameError, lambda: plax.pmap(lambda x: lax.psum(x, "j"), axis_name="i")(X),
           "unbound axis name: j")
    raises(NameError, lambda: lax.psum(1.0, "i"), "unbound axis name: i")
    raises(NameError, lambda: lax.axis_index("i"), "unbound axis name: i")
    mesh = _auto_mesh((N,), ("x",))
    raises(ValueError, lambda: plax.shard_map(lambda b: b, mesh=mesh, in_specs=P("y"),
                                              out_specs=P("y"))(X), "'y'", "args[0]")
    raises(ValueError, lambda: plax.shard_map(lambda b: b.sum(), mesh=mesh, in_specs=P("x"),
                                              out_specs=P("x"), check_vma=False)(X),
           "out_specs", "rank 0")
    if N > 1:  # (every size divides into one block)
        raises(ValueError, lambda: plax.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"),
                                                  out_specs=P("x"))(jnp.ones((N + 1,))),
               "not divisible")
        raises(ValueError, lambda: plax.device_put(jnp.ones(N + 1),
                                                   NamedSharding(mesh, P("x"))), "not divisible")
    raises(ValueError, lambda: NamedSharding(mesh, P("y")), "'y'")
    raises(ValueError, lambda: plax.make_mesh((N + 1,), ("x",)), "PLAX_NUM_CPU_DEVICES")


@check
def device_failure_cancels_the_others_without_deadlock():
    def f(x):
        def boom(i):
            if int(i) == N - 1:
                raise ZeroDivisionError("the last device fails")
            return np.float32(0)
        z = plax.pure_callback(boom, plax.ShapeDtypeStruct((), np.float32), lax.axis_index("i"))
        return lax.psum(x + z, "i")  # the other devices wait here

    err = raises(ZeroDivisionError, lambda: plax.pmap(f, axis_name="i")(X),
                 "the last device fails", f"CpuDevice(id={N - 1})")
    assert len(err.__notes__) == 1
    # the runtime is still usable
    close(plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(X), np.broadcast_to(X.sum(0), X.shape))


@check
def collective_timeout():
    if N < 2:
        return
    release = threading.Event()

    def stuck(i):
        if int(i) == N - 1:
            release.wait(60)  # the last device does not reach the psum in time
        return np.float32(0)

    def f(x):
        z = plax.pure_callback(stuck, plax.ShapeDtypeStruct((), np.float32), lax.axis_index("i"))
        return lax.psum(x + z, "i")

    try:
        with _env(PLAX_COLLECTIVE_TIMEOUT="0.3"):
            raises(TimeoutError, lambda: plax.pmap(f, axis_name="i")(X), "timed out",
                   "PLAX_COLLECTIVE_TIMEOUT")
    finally:
        release.set()


@check
def visualize_sharding_table():
    import contextlib
    import io
    mesh = _auto_mesh((N,), ("x",))
    x = plax.device_put(jnp.zeros((N, 2)), NamedSharding(mesh, P("x")))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        plax.debug.visualize_array_sharding(x)
    text = buf.getvalue()
    for i in range(N):
        assert f"CPU {i}" in text, text


def _smap(f, in_specs, out_specs, mesh, **kw):
    return plax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


@check
def replication_check_accepts_what_jax_accepts():
    """check_vma (the default): programs JAX 0.10.2 accepts run, with the right values."""
    mesh = _auto_mesh((N,), ("x",))
    A = rng.standard_normal((2 * N, 3)).astype(np.float32)
    S = A.reshape(N, 2, 3).sum(0)  # the psum over "x" of the blocks
    relu = plax.nn.relu
    accepted = [  # (function, in_specs, out_specs, expected)
        (lambda b: lax.psum(b, "x"), P("x"), P(), S),                         # psum replicates
        (lambda b: lax.pmean(b, "x"), P("x"), P(), S / N),
        (lambda b: b * 2, P(), P(), A * 2),                        # replicated in, unchanged
        (lambda b: b + lax.axis_index("x"), P("x"), P("x"),        # axis_index varies: P("x")
         A + np.repeat(np.arange(N), 2)[:, None]),
        (lambda b: b + lax.pmax(lax.axis_index("x"), "x"), P(), P(), A + N - 1),
        (lambda b: b * lax.axis_size("x"), P(), P(), A * N),
        (lambda b: lax.psum(plax.grad(lambda c: jnp.sum(c ** 2))(b), "x"), P("x"), P(), 2 * S),
        (lambda b: plax.grad(lambda c: jnp.sum(c ** 2))(b), P(), P(), 2 * A),  # grad, replicated
        (lambda b: plax.jit(lambda c: lax.psum(c, "x"))(b), P("x"), P(), S),
        (lambda b: plax.jit(lambda c: c * 2)(b), P(), P(), 2 * A),
        (lambda b: lax.cond(True, lambda c: lax.psum(c, "x"), lambda c: lax.psum(-c, "x"), b),
         P("x"), P(), S),
        (lambda b: lax.scan(lambda c, r: (c + lax.psum(r, "x"), None), jnp.zeros(3), b)[0],
         P("x"), P(), A.sum(0)),
        (lambda b: lax.scan(lambda c, r: (lax.cond(True, lambda: c + lax.psum(r, "x"),  # nested
                                                   lambda: c), None), jnp.zeros(3), b)[0],
         P("x"), P(), A.sum(0)),
        (lambda b: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + lax.psum(b, "x")),
                                  (0, jnp.zeros((2, 3))))[1], P("x"), P(), 2 * S),
        (lambda b: relu(b), P(), P(), np.maximum(A, 0)),                         # custom_jvp
        (lambda b: plax.checkpoint(lambda c: lax.psum(jnp.sin(c), "x"))(b), P("x"), P(),
         np.sin(A).reshape(N, 2, 3).sum(0)),
        (lambda b: plax.vmap(lambda r: lax.psum(r, "x"))(b), P("x"), P(), S),
        (lambda b: lax.psum(lax.ppermute(b, "x", [(i, (i + 1) % N) for i in range(N)]), "x"),
         P("x"), P(), S),
        (lambda b: lax.pbroadcast(b, "x", N - 1), P("x"), P(), A[-2:]),
        (lambda b: jnp.ones(b.shape), P("x"), P(), np.ones((2, 3))),   # depends on shapes only
    ]
    for f, si, so, want in accepted:
        close(_smap(f, si, so, mesh)(A), want, rtol=1e-4, atol=1e-4)
    # under jit and grad (the vmap formulation) the check runs at trace time too
    f = _smap(lambda b: lax.psum(b, "x"), P("x"), P(), mesh)
    close(plax.jit(f)(A), S, rtol=1e-5)
    close(plax.grad(lambda a: jnp.sum(f(a)))(A), np.ones_like(A))
    if N % 2 == 0:
        mesh2 = _auto_mesh((2, N // 2), ("data", "model"))
        B = rng.standard_normal((4, 2 * N)).astype(np.float32)
        g = _smap(lambda b: lax.psum(b, "data"), P("data", "model"), P(None, "model"), mesh2)
        close(g(B), B[:2] + B[2:])
        g2 = _smap(lambda b: lax.psum(b, ("data", "model")), P("data", "model"), P(), mesh2)
        close(g2(B), sum(np.split(B[:2] + B[2:], N // 2, axis=1)), rtol=1e-5)
        g3 = _smap(lambda b: b, P("data", "model"), P("model", "data"), mesh2)
        assert g3(B).shape == (2 * (N // 2), 8)  # blocks laid out the other way: accepted


@check
def replication_check_rejects_what_jax_rejects():
    """Outputs whose out_specs leave out an axis they may vary over raise a ValueError at
    trace time, naming the output and the axis; check_vma=False (or check_rep=False) skips."""
    mesh = _auto_mesh((N,), ("x",))
    A = rng.standard_normal((2 * N, 3)).astype(np.float32)
    rejected = [
        (lambda b: b, P("x"), P()),                                   # a block of a split arg
        (lambda b: b + lax.axis_index("x"), P(), P()),                # axis_index varies
        (lambda b: lax.all_gather(b, "x", tiled=True), P("x"), P()),  # all_gather: varying
        (lambda b: lax.ppermute(b, "x", [(i, (i + 1) % N) for i in range(N)]), P(), P()),
        (lambda b: lax.psum_scatter(b, "x", tiled=True), P(), P()),
        (lambda b: lax.all_to_all(b, "x", 0, 0, tiled=True), P(), P()),
        (lambda b: plax.grad(lambda c: jnp.sum(c ** 2))(b), P("x"), P()),
        (lambda b: plax.grad(lambda c: lax.psum(jnp.sum(c ** 2), "x"))(b), P("x"), P()),
        (lambda b: plax.jit(lambda c: c + 1)(b), P("x"), P()),
        (lambda b: lax.cond(b.sum() > 0, lambda c: c, lambda c: -c, b), P("x"), P()),
        (lambda b: lax.cond(True, lambda c: lax.psum(c, "x"), lambda c: c, b), P("x"), P()),
        (lambda b: lax.scan(lambda c, r: (c + r, None), jnp.zeros(3), b)[0], P("x"), P()),
        (lambda b: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + b),
                                  (0, jnp.zeros_like(b)))[1], P("x"), P()),
        (lambda b: plax.nn.relu(b), P("x"), P()),
        (lambda b: plax.checkpoint(jnp.sin)(b), P("x"), P()),
        (lambda b: lax.psum(b, "x", axis_index_groups=[[i] for i in range(N)]), P("x"), P()),
    ]
    for f, si, so in rejected:
        raises(ValueError, lambda: _smap(f, si, so, mesh)(A), "'x'", "check_vma=False",
               "out_specs")
        # the same programs run with the check off (the first device's block is returned)
        _smap(f, si, so, mesh, check_vma=False)(A)
    err = raises(ValueError, lambda: _smap(lambda b: (lax.psum(b, "x"), {"v": b}), P("x"),
                                           (P(), {"v": P()}), mesh)(A),
                 "out[1]['v']", "output 1 of 2", "mesh axis 'x'", "lax.psum", "PartitionSpec('x')")
    assert "out[0]" not in str(err)
    close(_smap(lambda b: b, P("x"), P(), mesh, check_rep=False)(A), A[:2])
    close(plax.experimental.shard_map.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"),
                                                out_specs=P(), check_rep=False)(A), A[:2])
    # under jit, grad and vmap: the check runs when the function is traced
    f = _smap(lambda b: b * 2, P("x"), P(), mesh)
    raises(ValueError, lambda: plax.jit(f)(A), "mesh axis 'x'")
    raises(ValueError, lambda: plax.grad(lambda a: jnp.sum(f(a)))(A), "mesh axis 'x'")
    raises(ValueError, lambda: plax.eval_shape(f, A), "mesh axis 'x'")
    w = jnp.float32(2.0)
    raises(ValueError, lambda: plax.grad(lambda w: jnp.sum(_smap(
        lambda b: b * w, P("x"), P(), mesh)(A)))(w), "mesh axis 'x'")
    if N % 2 == 0:
        mesh2 = _auto_mesh((2, N // 2), ("data", "model"))
        B = rng.standard_normal((4, 2 * N)).astype(np.float32)
        raises(ValueError, lambda: _smap(lambda b: lax.psum(b, "data"), P("data", "model"), P(),
                                         mesh2)(B), "mesh axis 'model'")
        raises(ValueError, lambda: _smap(lambda b: lax.psum(b, "model"), P("data", "model"),
                                         P(None, "model"), mesh2)(B), "mesh axis 'data'")
        raises(ValueError, lambda: _smap(lambda b: b + lax.axis_index("data"), P(),
                                         P("model"), mesh2)(B), "mesh axis 'data'")
        # axis_names: only those axes are checked
        _smap(lambda b: lax.psum(b, "data"), P("data", "model"), P(), mesh2,
              axis_names={"data"})(B)


@check
def jit_traces_again_under_other_axis_sizes_and_names():
    """One jitted function with a collective, under pmaps and vmaps of several sizes and
    names: each context gets its own trace (all_gather's shape depends on the size)."""
    gather = plax.jit(lambda x: lax.all_gather(x, "i"))
    for n in ([N, N // 2, N] if N > 1 else [1]):  # the first size again: a cache hit
        v = np.arange(n, dtype=np.float32)
        close(plax.pmap(gather, axis_name="i")(v), np.broadcast_to(v, (n, n)))
    for n in (2, 3, 2):
        v = np.arange(n, dtype=np.float32)
        close(plax.vmap(gather, axis_name="i")(v), np.broadcast_to(v, (n, n)))
    total = plax.jit(lambda x: lax.psum(x, "k"))
    close(plax.vmap(plax.vmap(total, axis_name="k"), axis_name="i")(np.ones((2, 3))),
          np.full((2, 3), 3.0))
    close(plax.vmap(plax.vmap(total, axis_name="i"), axis_name="k")(np.ones((2, 3))),
          np.full((2, 3), 2.0))
    # a name bound in one context but not the other: traced again, so the error is raised
    raises(NameError, lambda: plax.vmap(total, axis_name="j")(np.ones(3)), "unbound axis name: k")
    mesh = _auto_mesh((N,), ("i",))
    got = _smap(gather, P("i"), P("i"), mesh)(np.arange(N, dtype=np.float32))  # (N*N, 1)
    close(np.asarray(got).ravel(), np.tile(np.arange(N, dtype=np.float32), N))


@check
def collective_primitives_bind_under_pmap():
    assert lax.psum_p.name == "psum" and lax.axis_index_p.name == "axis_index"
    assert lax.reduce_scatter_p is lax.psum_scatter_p
    f = plax.pmap(lambda x: lax.psum_p.bind(x, axes=("i",)), axis_name="i")
    close(f(X), np.broadcast_to(X.sum(0), X.shape))
    g = plax.pmap(lambda x: x + lax.axis_index_p.bind(axes=("i",), axis_size=N), axis_name="i")
    close(g(X), X + np.arange(N)[:, None])
    h = plax.pmap(lambda x: lax.all_gather_p.bind(x, axes=("i",), axis=0, axis_size=N),
                  axis_name="i")
    close(h(X), np.broadcast_to(X, (N,) + X.shape))
    # JAX's binds pass axis_index_groups=None
    close(plax.pmap(lambda x: lax.pmax_p.bind(x, axes=("i",), axis_index_groups=None),
                    axis_name="i")(X), np.broadcast_to(X.max(0), X.shape))


@check
def ragged_all_to_all_on_devices():
    """lax.ragged_all_to_all under pmap and shard_map equals the vmap formulation, and its
    gradient through shard_map is the reverse exchange: member s sends (s + r) % 2 + 1 rows
    to member r, packed on both sides after one padding row."""
    sizes = np.array([[(s + r) % 2 + 1 for r in range(N)] for s in range(N)], np.int32)
    in_off = np.concatenate([np.zeros((N, 1), np.int32), np.cumsum(sizes, 1)[:, :-1]], 1)
    recv = np.ascontiguousarray(sizes.T)                  # recv[r, s] = sizes[s, r]
    at = 1 + np.concatenate([np.zeros((N, 1), np.int32), np.cumsum(recv, 1)[:, :-1]], 1)
    out_off = np.ascontiguousarray(at.T)                  # where s's slice lands on r
    operand = rng.standard_normal((N, 2 * N, 2)).astype(np.float32)
    output = rng.standard_normal((N, 2 * N + 2, 2)).astype(np.float32)
    args = (operand, output, in_off.astype(np.int32), sizes, out_off.astype(np.int32), recv)
    f = lambda *a: lax.ragged_all_to_all(*a, axis_name="i")
    got, ref = both(f, *args)
    close(got, ref)
    for r in range(N):
        for s_ in range(N):
            o, n_ = out_off[s_, r], sizes[s_, r]
            close(np.asarray(got)[r, o:o + n_], operand[s_, in_off[s_, r]:in_off[s_, r] + n_])
    mesh = _auto_mesh((N,), ("i",))
    flat = [a.reshape((-1,) + a.shape[2:]) for a in args]
    g = plax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    close(np.asarray(g(*flat)).reshape(got.shape), got)
    W = rng.standard_normal(flat[1].shape).astype(np.float32)
    grads = plax.grad(lambda a, b: jnp.sum(g(a, b, *flat[2:]) * W), argnums=(0, 1))(*flat[:2])
    refs = plax.grad(lambda a, b: jnp.sum(plax.vmap(f, axis_name="i")(a, b, *args[2:])
                                          * W.reshape(output.shape)), argnums=(0, 1))(*args[:2])
    for x, y in zip(grads, refs):
        close(np.asarray(x).reshape(y.shape), y)


@check
def psend_precv_on_devices():
    """JAX's psend/precv test on N devices: a chain of sends forward, a product on each
    receiver, the last member's result sent back to the first; eagerly on the device
    threads, under jit (the vmap formulation) and under pmap, equal to NumPy."""
    mesh = _auto_mesh((N,), ("x",))
    fwd_perm = [(j, j + 1) for j in range(N - 1)]
    back = [(N - 1, 0)]
    w = np.arange(1, N + 1, dtype=np.float32).reshape(N, 1)

    def body(a, axis):
        like = plax.ShapeDtypeStruct(a.shape, a.dtype)
        data = lax.precv(lax.psend(a, axis, fwd_perm), like, axis, fwd_perm)
        res = jnp.broadcast_to(jnp.dot(data, w), a.shape)
        return lax.precv(lax.psend(res, axis, back), like, axis, back)

    a = np.arange(N * N, dtype=np.float32).reshape(N, N)
    received = np.zeros_like(a)
    received[1:] = a[:-1]
    want = np.zeros_like(a)
    want[0] = (received[N - 1] @ w)[0]
    f = plax.shard_map(lambda b: body(b, "x"), mesh=mesh, in_specs=P("x", None),
                       out_specs=P("x", None))
    close(f(a), want)
    close(plax.jit(f)(a), want)
    close(plax.pmap(lambda r: body(r, "i"), axis_name="i")(a), want)


@check
def smap_over_the_context_mesh():
    """plax.smap (JAX 0.10's single-axis shard_map) on N devices against NumPy: in_axes 0, 1,
    -1 and None, in_axes inferred from a sharded argument, a psum to a replicated output,
    out_axes -1, and under jit."""
    x = np.arange(N * 2 * 3, dtype=np.float32).reshape(N * 2, 3)
    y = np.arange(3 * N, dtype=np.float32).reshape(3, N)
    member = np.repeat(np.arange(N), 2)[:, None]
    f = lambda a: a * 2 + lax.axis_index("x")
    with plax.set_mesh(_auto_mesh((N,), ("x",))):
        close(plax.smap(f, in_axes=0, out_axes=0, axis_name="x")(x), x * 2 + member)
        close(plax.smap(f, in_axes=1, out_axes=1, axis_name="x")(y), y * 2 + np.arange(N))
        close(plax.smap(f, in_axes=-1, out_axes=-1, axis_name="x")(y), y * 2 + np.arange(N))
        add = plax.smap(lambda a, b: a + b, in_axes=(0, None), out_axes=0, axis_name="x")
        close(add(x, np.ones(3, np.float32)), x + 1)
        total = plax.smap(lambda a: lax.psum(a.sum(0), "x"), in_axes=0, out_axes=None,
                          axis_name="x")
        close(total(x), x.sum(0))
        close(plax.jit(plax.smap(f, in_axes=0, out_axes=0, axis_name="x"))(x), x * 2 + member)
    with plax.set_mesh(plax.make_mesh((N,), ("x",))):  # Explicit: in_axes from the type
        sharded = plax.sharding.reshard(jnp.asarray(x), P("x"))
        close(plax.smap(f, out_axes=0, axis_name="x")(sharded), x * 2 + member)


if __name__ == "__main__":
    results = {}
    for name, fn in CHECKS.items():
        try:
            fn()
            results[name] = "ok"
        except BaseException:  # noqa: BLE001 -- reported to the parent
            results[name] = traceback.format_exc()
    print(json.dumps(results))

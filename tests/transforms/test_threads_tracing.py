"""Tracing from several threads at once, as JAX allows: the trace state is per thread, so two
threads tracing (the same jitted function, say) each get their own, correct result, and a
tracer of one never reaches the other.

Each check starts its threads at a ``threading.Barrier`` on a function nobody has traced yet
(a fresh function object: fresh jit caches), so the threads trace it at the same time; the
interpreter switches threads often meanwhile (``sys.setswitchinterval``), so their traces
interleave finely. Nothing waits on time: the results are checked against the same
computation run by one thread beforehand, on another function object, and must match
however the threads interleave. Shapes are small, and jit uses the NumPy backend (no new
compiled kernels).
"""
from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

N_THREADS = 6
ROUNDS = 3  # fresh functions each round: each round traces concurrently again


@pytest.fixture(autouse=True)
def _switch_threads_often():
    """Interleaves the threads' bytecode finely (the default switches every 5 ms, longer than
    some traces): without per-thread trace state, threads then meet each other's transforms."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _in_threads(work, n: int = N_THREADS) -> list:
    """``[work(0), ..., work(n - 1)]``, each run on its own thread, all started together at a
    barrier; the first exception of a thread is raised here."""
    barrier = threading.Barrier(n, timeout=120)
    results: list = [None] * n
    errors: list = [None] * n

    def run(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as e:  # noqa: BLE001 -- re-raised on the main thread
            errors[k] = e

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def _inputs(k: int):
    """Thread ``k``'s operands: distinct values, so one thread's result handed to another
    would not match."""
    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4) * (1 + 0.25 * k)
    y = np.cos(np.arange(12, dtype=np.float32)).reshape(4, 3) + 0.1 * k
    return jnp.asarray(x), jnp.asarray(y)


def _loss_factory():
    """A new function object each call (its jit caches are empty)."""
    def loss(x, y):
        return jnp.tanh(x @ y).sum() + jnp.sin(x).mean()
    return loss


def _check_concurrent(make_transformed, calls: int = 2):
    """Runs ``make_transformed()`` (a new transformed function) on every thread's inputs, once
    on this thread and then from all threads at once, and compares."""
    for _ in range(ROUNDS):
        reference = make_transformed()
        expected = [reference(*_inputs(k)) for k in range(N_THREADS)]
        shared = make_transformed()

        def work(k):
            outs = [shared(*_inputs(k)) for _ in range(calls)]
            return [plax.tree_util.tree_map(lambda a: np.asarray(a.block_until_ready()), o)
                    for o in outs]

        for k, outs in enumerate(_in_threads(work)):
            for out in outs:
                plax.tree_util.tree_map(
                    lambda a, b: np.testing.assert_allclose(a, np.asarray(b), rtol=1e-6,
                                                            atol=1e-6), out, expected[k])


def test_jit_of_grad_from_many_threads():
    _check_concurrent(lambda: plax.jit(plax.grad(_loss_factory(), argnums=(0, 1)),
                                       backend="numpy"))


def test_grad_without_jit_from_many_threads():
    _check_concurrent(lambda: plax.grad(_loss_factory()))


def test_jit_of_vmap_from_many_threads():
    def make():
        loss = _loss_factory()
        return plax.jit(plax.vmap(loss, in_axes=(0, None)), backend="numpy")

    def stacked(f):
        return lambda x, y: f(jnp.stack([x, 2 * x]), y)

    for _ in range(ROUNDS):  # the batched argument gets a leading axis of 2
        reference = stacked(make())
        expected = [reference(*_inputs(k)) for k in range(N_THREADS)]
        shared = stacked(make())
        outs = _in_threads(lambda k: np.asarray(shared(*_inputs(k))))
        for k, out in enumerate(outs):
            np.testing.assert_allclose(out, np.asarray(expected[k]), rtol=1e-6, atol=1e-6)


def test_jvp_inside_jit_from_many_threads():
    def make():
        loss = _loss_factory()
        return plax.jit(lambda x, y: plax.jvp(loss, (x, y), (jnp.ones_like(x), y)),
                        backend="numpy")

    _check_concurrent(make)


def test_scan_under_grad_and_jit_from_many_threads():
    def make():
        def f(x, y):
            def step(c, row):
                c = jnp.tanh(c * row.sum() + row[:3])
                return c, c.sum()
            c, ys = lax.scan(step, x[0, :3], y)
            return c.sum() + ys.sum()
        return plax.jit(plax.value_and_grad(f), backend="numpy")

    _check_concurrent(make)


def test_custom_jvp_under_grad_and_jit_from_many_threads():
    def make():
        @plax.custom_jvp
        def softplus(x):
            return jnp.log1p(jnp.exp(x))

        @softplus.defjvp
        def softplus_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return softplus(x), t * plax.nn.sigmoid(x)

        return plax.jit(plax.grad(lambda x, y: softplus(x @ y).sum()), backend="numpy")

    _check_concurrent(make)


def test_make_jaxpr_in_threads_is_each_thread_s_own():
    # make_jaxpr of one function from all threads at once: each jaxpr holds exactly the
    # equations of one trace (none staged from another thread's trace into it)
    for _ in range(ROUNDS):
        loss = _loss_factory()
        expected = str(plax.make_jaxpr(_loss_factory())(*_inputs(0)))
        texts = _in_threads(lambda k: str(plax.make_jaxpr(loss)(*_inputs(k))))
        assert texts == [expected] * N_THREADS


def test_a_thread_started_while_another_traces_runs_eagerly():
    # a thread started from inside a trace begins with no transform (as JAX's per-thread
    # trace context): its operations run now, on concrete values
    seen = []

    def f(x):
        t = threading.Thread(target=lambda: seen.append(jnp.sin(jnp.ones(2)) + 1.0))
        t.start()
        t.join()
        return x * 2.0

    out = plax.jit(f, backend="numpy")(jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out), 2.0)
    assert type(seen[0]) is plax.Array  # not a tracer of f's trace
    np.testing.assert_allclose(np.asarray(seen[0]), np.sin(1.0) + 1.0, rtol=1e-6)


def test_matmul_precision_context_in_one_thread_while_others_trace():
    # one thread traces inside default_matmul_precision("highest") while the others trace the
    # same (fresh) function with no context: only the first one's jaxpr records it
    for _ in range(ROUNDS):
        f = _loss_factory()

        def work(k):
            if k == 0:
                with plax.default_matmul_precision("highest"):
                    return str(plax.make_jaxpr(f)(*_inputs(k)))
            return str(plax.make_jaxpr(f)(*_inputs(k)))

        texts = _in_threads(work)
        assert "HIGHEST" in texts[0]
        assert all("HIGHEST" not in t for t in texts[1:])


def test_enable_x64_context_in_one_thread_while_others_jit():
    # enable_x64 in one thread, jit of one fresh function from all of them at once: each
    # thread's result has its own thread's dtype (the jit cache keys by the thread's flags)
    for _ in range(ROUNDS):
        f = _loss_factory()
        g = plax.jit(plax.grad(f), backend="numpy")

        def work(k):
            x, y = np.asarray(_inputs(k)[0]), np.asarray(_inputs(k)[1])
            if k == 0:
                with plax.enable_x64(True):
                    return g(jnp.asarray(x, np.float64), jnp.asarray(y, np.float64)).dtype
            return g(jnp.asarray(x), jnp.asarray(y)).dtype

        dtypes = _in_threads(work)
        assert dtypes[0] == np.float64
        assert all(d == np.float32 for d in dtypes[1:])


def test_threads_calling_a_new_jit_at_once_trace_and_compile_it_once():
    # the first calls of one signature from all threads at once: one thread traces and
    # compiles, the others wait for its entry (and a new signature is compiled again)
    for _ in range(ROUNDS):
        traced = []

        def f(x, y):
            traced.append(threading.get_ident())
            return jnp.tanh(x @ y).sum() + jnp.sin(x).mean()

        g = plax.jit(f, backend="numpy")
        outs = _in_threads(lambda k: np.asarray(g(*_inputs(k))))
        assert len(traced) == 1
        for k, out in enumerate(outs):
            x, y = (np.asarray(a, np.float64) for a in _inputs(k))
            np.testing.assert_allclose(out, np.tanh(x @ y).sum() + np.sin(x).mean(),
                                       rtol=1e-5)
        g(jnp.ones((2, 3)), jnp.ones((3, 2)))  # another signature
        assert len(traced) == 2


def test_saved_residuals_from_many_threads_keep_their_source_lines():
    # each thread's capture of source lines is its own: one ending does not drop another's
    # records, and none records another thread's equations
    from plax.ad_checkpoint import saved_residuals

    def f(x):
        y = jnp.sin(x)
        z = jnp.cos(y) * x
        return (z * y).sum()

    expected = [d for _, d in saved_residuals(f, jnp.ones(3))]
    assert any(" from " in d and d.endswith(".f)") for d in expected)
    for _ in range(ROUNDS):
        got = _in_threads(lambda k: [d for _, d in saved_residuals(f, jnp.ones(3) * k)])
        assert got == [expected] * N_THREADS


def test_pmap_of_grad_with_a_collective_from_many_threads():
    # pmap binds its axis name around its trace (a per-thread binding): each thread's psum
    # sees its own pmap's axis, over as many devices as there are
    n = plax.local_device_count()

    def make():
        def loss(x):
            return plax.lax.psum(jnp.tanh(x).sum(), "i")
        return plax.pmap(plax.grad(loss), axis_name="i")

    def inputs(k):
        return (jnp.asarray(np.linspace(-1, 1, 3 * n, dtype=np.float32).reshape(n, 3)
                            * (1 + 0.25 * k)),)

    for _ in range(ROUNDS):
        reference = make()
        expected = [np.asarray(reference(*inputs(k))) for k in range(N_THREADS)]
        shared = make()
        outs = _in_threads(lambda k: np.asarray(shared(*inputs(k))))
        for k, out in enumerate(outs):
            np.testing.assert_allclose(out, expected[k], rtol=1e-6)

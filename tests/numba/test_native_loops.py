"""Native control flow on the Numba backend: ``scan``, ``fori_loop``, ``while_loop`` and
``cond``/``switch`` compiled as loops and branches inside one njit function
(:mod:`plax_numba.wholegen`), checked against the NumPy backend and Python references, and
the Python-loop fallback for bodies the generator does not express.

Numba compiles slowly on the CI machine: each test compiles one or two kernels, and the
parametrized cases reuse one traced function per shape of test.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

F32_ULP = np.finfo(np.float32).eps


def run_both(f, *args):
    """``f`` jitted on the Numba and the NumPy backend, leaves as host arrays, and the Numba
    program's generated text."""
    jf = plax.jit(f, backend="numba")
    got = [np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))]
    want = [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]
    return got, want, jf.lower(*args).compile().as_text()


def assert_close(got, want, ulps=8):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            scale = np.maximum(np.abs(w), 1.0)
            tol = ulps * np.finfo(g.dtype).eps
            assert np.all(np.abs(g.astype(np.float64) - w) <= tol * scale), (g, w)
        else:
            np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------- scan

def _scan_all_dtypes(reverse):
    def f(h, n, flag, xs, ks):
        def cell(carry, inp):
            h, n, flag = carry
            x, k = inp
            h = jnp.tanh(h * 0.5 + x)                  # float32 vector carry
            n = n * 3 + k                              # int32 scalar carry (wraps)
            flag = jnp.logical_xor(flag, k % 2 == 0)   # bool scalar carry
            return (h, n, flag), (h.sum(), n, flag)
        return lax.scan(cell, (h, n, flag), (xs, ks), reverse=reverse)
    return f


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carries_and_stacks_every_dtype(reverse):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((7, 4)).astype(np.float32)
    ks = rng.integers(-50, 50, 7).astype(np.int32)
    args = (np.zeros(4, np.float32), np.int32(2**30), np.bool_(True), xs, ks)
    got, want, text = run_both(_scan_all_dtypes(reverse), *args)
    assert "for it" in text and "def kernel" in text  # one native loop
    assert_close(got, want)
    # a Python loop reference for the integer and bool carries (exact)
    n, flag, ns, flags = np.int32(2**30), True, [], []
    order = range(6, -1, -1) if reverse else range(7)
    for i in order:
        with np.errstate(over="ignore"):
            n = np.int32(n * np.int32(3) + ks[i])
        flag = flag != (ks[i] % 2 == 0)
        ns.append(n)
        flags.append(flag)
    if reverse:
        ns, flags = ns[::-1], flags[::-1]
    assert got[1] == n and got[2] == flag
    np.testing.assert_array_equal(got[4], ns)
    np.testing.assert_array_equal(got[5], flags)


def test_fori_loop_and_float64():
    plax.config.update("jax_enable_x64", True)
    try:
        def f(x, n):
            def body(i, c):
                acc, v = c
                return acc + v * i, v * 0.5 + jnp.sin(v)
            return lax.fori_loop(0, 25, body, (jnp.zeros_like(x), x))
        x = np.linspace(-2, 2, 6)
        got, want, text = run_both(f, x, np.int64(3))
        assert "for it" in text
        assert got[0].dtype == np.float64
        assert_close(got, want, ulps=4)
        # Python reference
        acc, v = np.zeros_like(x), x.copy()
        for i in range(25):
            acc, v = acc + v * i, v * 0.5 + np.sin(v)
        np.testing.assert_allclose(got[0], acc, rtol=1e-13)
    finally:
        plax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------- while, cond, nesting

def test_while_with_data_dependent_trip_count():
    def f(x, limit):
        def cond(c):
            return c[0].sum() < limit
        def body(c):
            v, steps = c
            return v * 1.5 + 1.0, steps + 1
        return lax.while_loop(cond, body, (x, jnp.int32(0)))
    x = np.array([0.5, 1.0, 2.0], np.float32)
    jf = plax.jit(f, backend="numba")
    for limit in (np.float32(0.0), np.float32(10.0), np.float32(1e4)):
        got = [np.asarray(a) for a in jf(x, limit)]
        want = [np.asarray(a) for a in plax.jit(f, backend="numpy")(x, limit)]
        assert_close(got, want)
        v, steps = x.copy(), 0
        while v.sum() < limit:
            v, steps = v * np.float32(1.5) + np.float32(1.0), steps + 1
        assert got[1] == steps
    assert "while True:" in jf.lower(x, limit).compile().as_text()


def _nested(x, idx, m):
    def outer(carry, i):
        v, k = carry
        # cond inside scan: a switch whose index runs out of range (clamped, as in XLA)
        v = lax.switch(k + i - 2, [lambda v: v + 1.0, lambda v: v * m @ v.T @ v,
                                   lambda v: jnp.cos(v)], v)
        # a loop inside the loop body
        v = lax.fori_loop(0, 3, lambda j, v: v * 0.5 + jnp.float32(j), v)
        return (v, k + 1), v[0, 0]
    return lax.scan(outer, (x, idx), jnp.arange(6, dtype=jnp.int32))


def test_nested_loops_and_cond_inside_scan():
    x = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2) / 8
    got, want, text = run_both(_nested, x, np.int32(-1), np.float32(0.25))
    assert text.count("for it") >= 2 and "elif" in text
    assert_close(got, want, ulps=16)


def test_grad_of_scan_under_jit_compiles_the_transposed_scan():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((5, 5)) / 3).astype(np.float32)
    xs = rng.standard_normal((9, 5)).astype(np.float32)

    def loss(w, xs):
        def cell(h, x):
            h = jnp.tanh(w @ h + x)
            return h, h
        h, hs = lax.scan(cell, jnp.zeros(5, jnp.float32), xs)
        return (hs ** 2).sum() + h.sum()

    f = plax.grad(loss, argnums=(0, 1))
    got, want, text = run_both(f, w, xs)
    assert text.count("for it") >= 2  # the forward scan and the transposed one
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, wv, rtol=2e-5, atol=2e-6)


# ---------------------------------------------------------------- per-equation native steps

def test_native_loop_inside_a_larger_program(monkeypatch):
    """Above the whole-program size, the scan is one native step of the lowered program."""
    monkeypatch.setenv("PLAX_NUMBA_WHOLE_MAX", "0")
    f = _scan_all_dtypes(False)
    rng = np.random.default_rng(0)
    args = (np.zeros(4, np.float32), np.int32(5), np.bool_(False),
            rng.standard_normal((7, 4)).astype(np.float32), np.arange(7, dtype=np.int32))
    got, want, text = run_both(lambda *a: f(*a)[1], *args)
    assert "whole-program" not in text and "for it" in text
    assert_close(got, want)


def test_arg_reductions_and_cumulative_ops_inside_a_native_loop():
    """A loop body mixing ``cumsum`` and ``argmax`` with other work is one native loop (their
    fused clusters, ``codegen.FUSES``, inside the whole-program kernel), with no fallback
    warning, and its values are the NumPy backend's bit for bit (a sum along rows in
    order, an index, elementwise float32 arithmetic)."""
    import warnings

    from plax.lowering import PlaxFallbackWarning

    def f(x, y):
        def body(i, c):
            v, best = c
            s = jnp.cumsum(v * 0.5 + y, axis=1)
            return s * 0.25 - v, best + jnp.argmax(jnp.abs(s - v), axis=1)
        return lax.fori_loop(0, 5, body, (x, jnp.zeros(x.shape[0], jnp.int32)))
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((3, 6)).astype(np.float32) for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        got, want, text = run_both(f, x, y)
    # the loop, the cumsum's row scan and the argmax's index, all in the one kernel
    assert "for it" in text and "scan_lines_f32_once(" in text, text
    assert re.search(r"m\d+\[i0\] = q", text), text
    assert_close(got, want, ulps=0)


def test_a_reduction_over_no_axes_in_a_loop_is_native():
    """``vmap`` of a while over a one-element batch leaves ``reduce_or[axes=()]`` of a scalar
    in the predicate (``random.poisson`` has one): the loop stays native, the reduction being
    its operand."""
    import warnings

    from plax.lowering import PlaxFallbackWarning

    def f(x):
        def cond(c):
            return lax.reduce_or(lax.reduce_or(c[1] < 7, axes=(0,)), axes=())
        def body(c):
            v, n = c
            return v * 1.5 + lax.reduce_max(v, axes=()), n + 1
        return lax.while_loop(cond, body, (x, jnp.zeros(3, jnp.int32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        got, want, text = run_both(f, np.float32(0.25))
    assert "while True" in text, text
    assert_close(got, want, ulps=0)


def test_square_and_hypot_in_a_body_keep_the_loop_native():
    """``lax.square`` (which ``jnp.hypot`` and ``jnp.square`` stage) is elementwise: a body
    using it is one native loop, not a Python loop around the compiled body (it was, with a
    warning naming ``square``: 36x slower on a 2000-step scan), and its values are the NumPy
    backend's (each square one rounded product)."""
    import warnings

    from plax.lowering import PlaxFallbackWarning

    def f(xs):
        def cell(c, x):
            c = c * 0.5 + jnp.hypot(c, x) * 0.25 - lax.square(x)
            return c, lax.square(c.astype(jnp.int32))
        return lax.scan(cell, jnp.zeros(xs.shape[1], jnp.float32), xs)
    xs = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        got, want, text = run_both(f, xs)
    assert "for it" in text, text
    assert_close(got, want, ulps=2)


def test_unsupported_body_keeps_the_python_loop():
    from plax_numba.tiered import PlaxNativeLoopWarning

    def f(xs):
        def cell(c, x):
            s = jnp.sort(x)  # sort: not compiled natively
            return c + s[-1], s
        return lax.scan(cell, jnp.float32(0), xs)
    xs = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    with pytest.warns(PlaxNativeLoopWarning, match="sort"):
        got, want, text = run_both(f, xs)
    assert "for it" not in text
    assert_close(got, want, ulps=0)


@pytest.mark.parametrize("callback", ["debug", "io"])
def test_a_body_calling_the_host_keeps_the_python_loop_without_a_warning(callback, capfd):
    # JAX's debugging page: jax.debug.breakpoint (a debug callback) in a cond's branch. A
    # host callback in a body is a host round trip by request: no PlaxNativeLoopWarning.
    import warnings

    from plax.experimental import io_callback

    seen = []

    def f(x):
        def hit(v):
            if callback == "debug":
                plax.debug.callback(lambda a: seen.append(float(a)), v)
            else:
                io_callback(lambda a: seen.append(float(a)) or np.float32(0),
                            plax.ShapeDtypeStruct((), jnp.float32), v)
        lax.cond(x > 0, lambda v: None, hit, x)
        return x * 2

    jf = plax.jit(f, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning (the native-loop one) fails the test
        assert float(jf(np.float32(3.0))) == 6.0
        assert float(jf(np.float32(-1.5))) == -3.0
    assert seen == [-1.5]

"""``scan`` as one native loop on the Numba backend (issue 26): ``xs[i]`` read in place, the
body's kernels writing into buffers allocated once before the loop, array carries trading
buffers with their new values (``c, b = b, c``), ``ys[i]`` stored into the preallocated
output; and the scans that ``grad``, ``vmap`` and ``checkpoint`` produce.

Each test checks that the native loop is taken (the kernel's source in ``as_text()``, no
fallback warning) and compares with the NumPy backend, and with JAX where it is installed.
Numba compiles slowly on the CI machine: the functions are small and each test compiles
one or two kernels.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp
from plax.lowering import PlaxFallbackWarning

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover - JAX is optional (pip install -e ".[bench]")
    jax = None


def compiled(f, *args):
    """``f`` jitted on the Numba backend: leaves as host arrays and the program's text,
    failing on any fallback warning (a body run as a Python loop, a reference kernel)."""
    jf = plax.jit(f, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        got = [np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))]
        text = jf.lower(*args).compile().as_text()
    return got, text


def reference(f, *args):
    """``f`` jitted on the NumPy backend, leaves as host arrays."""
    return [np.asarray(x) for x in
            plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]


def with_jax(f_of_lib, *args):
    """``f_of_lib(jax namespace)`` run by JAX (leaves as host arrays), or None without JAX."""
    if jax is None:
        return None
    out = jax.jit(f_of_lib(jax, jjnp))(*args)
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def assert_close(got, want, ulps=8):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if g.dtype.kind == "f":
            scale = np.maximum(np.abs(w.astype(np.float64)), 1.0)
            tol = ulps * np.finfo(g.dtype).eps
            assert np.all(np.abs(g.astype(np.float64) - w) <= tol * scale), (g, w)
        else:
            np.testing.assert_array_equal(g, w)


def loop_body(text: str) -> list[str]:
    """The lines of the first native ``for`` loop's body in the kernel source."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s+for it\d+ in range", line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return body


def assert_allocation_free_loop(text: str) -> None:
    """The native loop allocates nothing per step: its buffers come before it."""
    body = loop_body(text)
    assert body and not any("np.empty(" in line or ".copy()" in line for line in body), body


# ---------------------------------------------------------------- the issue's programs

def _ema(L, np_):
    return lambda xs: L.lax.scan(lambda c, x: (0.9 * c + 0.1 * x, c),
                                 np_.zeros(16, np_.float32), xs)


def _tanh_rnn(L, np_):
    return lambda xs: L.lax.scan(lambda c, x: (np_.tanh(c * 0.9 + x), c),
                                 np_.zeros(8, np_.float32), xs)[0]


@pytest.mark.parametrize("make", [_ema, _tanh_rnn], ids=["ema", "tanh"])
def test_issue_programs_are_one_allocation_free_loop(make):
    xs = np.random.default_rng(0).standard_normal((50, 16 if make is _ema else 8))
    xs = xs.astype(np.float32)
    f = make(plax, jnp)
    got, text = compiled(f, xs)
    assert "for it" in text and "# swap" in text
    assert_allocation_free_loop(text)
    if make is _ema:  # ys[i] stored through the row's view over a run-time extent (vectorised)
        body = "\n".join(loop_body(text))
        assert re.search(r"for j\d+ in range\(16 \* unit\):\n\s+yr\d+\[j\d+\] = ", body), body
    assert_close(got, reference(f, xs))
    want = with_jax(make, xs)
    if want is not None:
        assert_close(got, want, ulps=16)


def test_unread_ys_are_not_computed():
    """``scan(...)[0]``: dead-code elimination drops the stacked output (the body computes
    the carry only)."""
    xs = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    got, text = compiled(_tanh_rnn(plax, jnp), xs)
    assert "ys" not in "\n".join(loop_body(text))
    from plax.core.passes import dce
    jaxpr = plax.make_jaxpr(_tanh_rnn(plax, jnp))(xs).jaxpr
    [scan] = [e for e in dce(jaxpr).eqns if e.primitive.name == "scan"]
    assert len(scan.outvars) == 1 and len(scan.params["jaxpr"].jaxpr.outvars) == 1


# ---------------------------------------------------------------- scan's options

def _options(reverse, unroll):
    def f(c0, xs):
        def cell(c, x):
            a, (b, n) = c["a"], c["bn"]
            a2 = a * 0.5 + x
            n2 = n * 3 + 1                                  # int32 scalar, wraps
            return {"a": a2, "bn": (b + a, n2)}, (a2 - b, n2)
        return lax.scan(cell, c0, xs, reverse=reverse, unroll=unroll)
    return f


@pytest.mark.parametrize("reverse,unroll", [(False, 1), (True, 1), (False, 3), (True, True)])
def test_reverse_unroll_and_pytree_carries(reverse, unroll):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((7, 4)).astype(np.float32)
    c0 = {"a": np.ones(4, np.float32), "bn": (np.zeros(4, np.float32), np.int32(2 ** 30))}
    f = _options(reverse, unroll)
    got, text = compiled(f, c0, xs)
    assert "for it" in text and "# swap" in text
    assert_allocation_free_loop(text)
    assert_close(got, reference(f, c0, xs))
    # a Python loop in float64 for the values, exact for the integers
    a, b, n = c0["a"].astype(np.float64), c0["bn"][0].astype(np.float64), c0["bn"][1]
    ys, ns = [None] * 7, [None] * 7
    for i in (range(6, -1, -1) if reverse else range(7)):
        a, b, y = a * 0.5 + xs[i], b + a, a * 0.5 + xs[i] - b
        with np.errstate(over="ignore"):
            n = np.int32(n * np.int32(3) + np.int32(1))
        ys[i], ns[i] = y, n
    np.testing.assert_allclose(got[0], a, rtol=1e-5)
    np.testing.assert_allclose(got[1], b, rtol=1e-5, atol=1e-5)
    assert got[2] == n
    np.testing.assert_allclose(got[3], np.stack(ys), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[4], np.array(ns, np.int32))


@pytest.mark.parametrize("length", [0, 1, 5])
def test_xs_none_and_short_lengths(length):
    def f(c):
        def cell(c, _):
            return c * 2 + 1, c
        return lax.scan(cell, c, None, length=length)
    c = np.arange(6, dtype=np.int32)
    got, text = compiled(f, c)
    assert "for it" in text
    assert_close(got, reference(f, c))
    want = c.copy()
    for _ in range(length):
        want = want * 2 + 1
    np.testing.assert_array_equal(got[0], want)
    assert got[1].shape == (length, 6)
    ref = with_jax(lambda L, np_: lambda c: L.lax.scan(lambda c, _: (c * 2 + 1, c), c, None,
                                                       length=length), c)
    if ref is not None:
        assert_close(got, ref, ulps=0)


def test_carries_that_trade_places_or_alias():
    """Carries read by reference (swapped, passed through, taking another's old value or a
    slice of xs) are assigned by reference; only a carry whose buffers nothing else holds
    trades buffers. Each case against a Python loop (exact: additions of small integers)."""
    def f(a, b, c, d, xs):
        def cell(carry, x):
            a, b, c, d = carry
            return (b, a, c, x * 2.0), a + d       # swap a/b, c unchanged, d from x
        return lax.scan(cell, (a, b, c, d), xs)

    def g(a, b, xs):
        def cell(carry, x):
            a, b = carry
            new_a = a + x
            return (new_a, a), b                    # b takes a's old value; ys reads old b
        return lax.scan(cell, (a, b), xs)

    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    a, b, c, d = (np.full(3, v, np.float32) for v in (1, 2, 3, 4))
    got, _ = compiled(f, a, b, c, d, xs)
    assert_close(got, reference(f, a, b, c, d, xs), ulps=0)
    ca, cb, cd, ys = a, b, d, []
    for x in xs:
        ys.append(ca + cd)
        ca, cb, cd = cb, ca, x * 2
    for g_, w in zip(got, [ca, cb, c, cd, np.stack(ys)]):
        np.testing.assert_array_equal(g_, w)

    got, text = compiled(g, a, b, xs)
    assert_close(got, reference(g, a, b, xs), ulps=0)
    ca, cb, ys = a, b, []
    for x in xs:
        ys.append(cb)
        ca, cb = ca + x, ca
    for g_, w in zip(got, [ca, cb, np.stack(ys)]):
        np.testing.assert_array_equal(g_, w)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
def test_integer_and_float64_carries(dtype):
    def f(c, xs):
        return lax.scan(lambda c, x: (c * 3 + x, c - x), c, xs)
    c = np.arange(5).astype(dtype)
    xs = (np.arange(20).reshape(4, 5) % 7).astype(dtype)
    with plax.config.override("jax_enable_x64", dtype == np.float64):
        got, text = compiled(f, c, xs)
        assert "# swap" in text
        assert_close(got, reference(f, c, xs), ulps=0)
    want_c, ys = c.copy(), []
    with np.errstate(over="ignore"):
        for x in xs:
            ys.append((want_c - x).astype(dtype))
            want_c = (want_c * dtype(3) + x).astype(dtype)
    np.testing.assert_array_equal(got[0], want_c)
    np.testing.assert_array_equal(got[1], np.stack(ys))


# ---------------------------------------------------------------- grad, vmap, checkpoint

def _rnn_loss(L, np_, remat=False):
    def loss(w, u, xs):
        def cell(h, x):
            h = np_.tanh(w @ h + u @ x)
            return h, h
        body = L.checkpoint(cell) if remat else cell
        h, hs = L.lax.scan(body, np_.zeros(6, np_.float32), xs)
        return np_.sum(hs ** 2) + np_.sum(h)
    return loss


@pytest.mark.parametrize("remat", [False, True], ids=["plain", "checkpoint"])
def test_grad_through_scan_against_finite_differences(remat):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((6, 6)) / 3).astype(np.float32)
    u = (rng.standard_normal((6, 4)) / 2).astype(np.float32)
    xs = rng.standard_normal((9, 4)).astype(np.float32)
    loss = _rnn_loss(plax, jnp, remat)
    grad = plax.grad(loss, argnums=(0, 1))
    got, text = compiled(grad, w, u, xs)
    assert text.count("for it") >= 2  # the forward scan and the transposed one
    assert "np.dot(" not in text      # the outer products of the backward pass are fused
    for g, r in zip(got, reference(grad, w, u, xs)):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-6)
    # central differences of the float64 loss, on a few entries of each argument
    def loss64(w, u):
        h, total = np.zeros(6), 0.0
        for x in xs.astype(np.float64):
            h = np.tanh(w @ h + u @ x)
            total += np.sum(h ** 2)
        return total + np.sum(h)
    w64, u64, eps = w.astype(np.float64), u.astype(np.float64), 1e-6
    for (i, j) in [(0, 0), (2, 5), (5, 3)]:
        dw = np.zeros_like(w64)
        dw[i, j] = eps
        fd = (loss64(w64 + dw, u64) - loss64(w64 - dw, u64)) / (2 * eps)
        np.testing.assert_allclose(got[0][i, j], fd, rtol=1e-3, atol=1e-4)
    for (i, j) in [(0, 0), (4, 3)]:
        du = np.zeros_like(u64)
        du[i, j] = eps
        fd = (loss64(w64, u64 + du) - loss64(w64, u64 - du)) / (2 * eps)
        np.testing.assert_allclose(got[1][i, j], fd, rtol=1e-3, atol=1e-4)
    want = with_jax(lambda L, np_: L.grad(_rnn_loss(L, np_, remat), argnums=(0, 1)), w, u, xs)
    if want is not None:
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_vmap_of_scan_against_a_python_loop():
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((5, 5)) / 3).astype(np.float32)
    h0 = rng.standard_normal((3, 5)).astype(np.float32)       # batch of 3 initial carries
    xs = rng.standard_normal((3, 8, 5)).astype(np.float32)

    def run(h, xs):
        return lax.scan(lambda h, x: (jnp.tanh(w @ h + x), h.sum()), h, xs)
    f = plax.vmap(run)
    got, text = compiled(f, h0, xs)
    assert "for it" in text and "# swap" in text  # the batched carry trades buffers
    assert_close(got, reference(f, h0, xs), ulps=64)
    for b in range(3):
        h = h0[b].astype(np.float64)
        sums = []
        for x in xs[b]:
            sums.append(h.sum())
            h = np.tanh(w @ h + x)
        np.testing.assert_allclose(got[0][b], h, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1][b], sums, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse,unroll", [(False, 1), (True, 2)])
def test_stacked_outputs_of_any_rank(reverse, unroll):
    """``ys`` rows of rank 0, 1, 2 and 3 (each stored as a flat row of a ``(length, size)``
    buffer, shaped after the loop), one of them the carry's previous value, against a
    Python loop (exact: small integers in float32) and the NumPy backend."""
    def f(c, xs):
        def cell(c, x):
            new = c * 2.0 - x[0]
            return new, (c.sum(), x[1], c[:, None] * x[0][None, :], (c + new)[None, :, None])
        return lax.scan(cell, c, xs, reverse=reverse, unroll=unroll)
    c = np.arange(4, dtype=np.float32)
    xs = (np.arange(5 * 2 * 4).reshape(5, 2, 4) % 5).astype(np.float32)
    got, text = compiled(f, c, xs)
    assert "for it" in text and "yr" in text
    assert_allocation_free_loop(text)
    assert_close(got, reference(f, c, xs), ulps=0)
    carry, ys = c.copy(), [[None] * 5 for _ in range(4)]
    for i in (range(4, -1, -1) if reverse else range(5)):
        new = carry * 2 - xs[i, 0]
        row = (carry.sum(), xs[i, 1], carry[:, None] * xs[i, 0][None, :],
               (carry + new)[None, :, None])
        for k in range(4):
            ys[k][i] = row[k]
        carry = new
    np.testing.assert_array_equal(got[0], carry)
    for k in range(4):
        np.testing.assert_array_equal(got[1 + k], np.stack(ys[k]))

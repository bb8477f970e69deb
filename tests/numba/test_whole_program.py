"""Whole-program kernels on the Numba backend: a small jitted program (every value at most
``plax_numba.backend.WHOLE_MAX`` elements) compiles into one njit call
(:mod:`plax_numba.wholegen`), checked against the NumPy backend; tiering, the fallbacks, the
disk-cache key and cluster kernels shared between programs.

Each test compiles one program (numba is slow to compile on the CI machine; two tiny ones for
the sharing test); the structural primitives share one program.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp
from plax.lowering import PlaxFallbackWarning


def run_both(f, *args):
    jf = plax.jit(f, backend="numba")
    got = [np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))]
    want = [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]
    return got, want, jf.lower(*args).compile().as_text()


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def structural(a, b, m, k, i):
    """Every structural primitive the generator handles, on small arrays."""
    outs = []
    outs.append(a @ b)                                     # loops (m*n*k < BLAS_MIN)
    outs.append(a.T @ a)                                   # transposed operand
    outs.append(jnp.einsum("bij,bjk->bik", m, m))          # batched
    outs.append(k @ k.T)                                   # int32 dot (wraps like XLA)
    big = jnp.tile(a, (4, 4))                              # 24 x 16
    outs.append(big @ big.T)                               # BLAS, a transposed view
    outs.append(big @ a[0].repeat(4))                      # BLAS matrix-vector
    outs.append(jnp.dot(a[0], a[1]))                       # rank-0 result
    outs.append(a[1:5:2, ::-1])                            # slice, rev
    outs.append(lax.dynamic_slice(a, (i, i + 7), (2, 3)))  # clamped starts
    outs.append(lax.dynamic_update_slice(a, b[:2, :3], (i - 9, i)))
    outs.append(jnp.concatenate([a, b.T], axis=0))
    outs.append(jnp.pad(k, ((1, 2), (0, 1)), constant_values=7))
    outs.append(lax.broadcasted_iota(jnp.int32, (3, 4), 1) + i)
    outs.append(jnp.transpose(m, (2, 0, 1)).reshape(3, -1)[..., None].squeeze(-1))
    outs.append((a > 0).sum(axis=1))                       # bool -> int reduction
    outs.append(jnp.where(a > b.T, a, -b.T).max(axis=0))
    outs.append(a.astype(jnp.int32) ^ 5)
    return outs


def test_structural_primitives_in_one_kernel():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    m = rng.standard_normal((2, 3, 3)).astype(np.float32)
    k = rng.integers(-2**20, 2**20, (3, 5)).astype(np.int32)
    got, want, text = run_both(structural, a, b, m, k, np.int32(2))
    body = text.split("def kernel(")[-1]
    assert "whole-program kernel" in text
    assert "np.dot(" in body and "dot_loops(" in body
    assert_close(got, want)


def test_linear_regression_step_is_one_kernel():
    rng = np.random.default_rng(1)
    W, b = np.zeros((10, 5), np.float32), np.zeros(5, np.float32)
    x = rng.standard_normal((20, 10)).astype(np.float32)
    y = rng.standard_normal((20, 5)).astype(np.float32)

    def mse(W, b, x, y):
        def sq(x, y):
            d = y - (jnp.dot(x, W) + b)
            return jnp.inner(d, d) / 2.0
        return jnp.mean(plax.vmap(sq)(x, y), axis=0)

    def update(W, b, x, y):
        return W - 0.3 * plax.grad(mse, 0)(W, b, x, y), b - 0.3 * plax.grad(mse, 1)(W, b, x, y)

    got, want, text = run_both(update, W, b, x, y)
    assert "whole-program kernel" in text
    assert_close(got, want)


def _small(x, y):
    return jnp.tanh(x @ y) * 2.0 + 1.0, (x * y.T).sum()


def test_tiered_whole_program_switches_to_the_kernel(monkeypatch, tmp_path):
    from plax_numba import cache, tiered
    monkeypatch.setattr(cache, "_dir", str(tmp_path))  # empty: nothing loads at once
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = x.T.copy() * 0.5
    jf = plax.jit(_small, backend="numba")
    want = [np.asarray(v) for v in plax.jit(_small, backend="numpy")(x, y)]
    first = [np.asarray(v) for v in jf(x, y)]     # the reference path
    jf(x, y)                                       # hot: compiles in the background
    assert tiered.wait_idle(timeout=300)
    later = [np.asarray(v) for v in jf(x, y)]      # the kernel
    assert_close(first, want, rtol=1e-6)
    assert_close(later, want, rtol=1e-6)


def test_unexpressible_program_keeps_the_per_cluster_path():
    def f(x):
        return jnp.sort(x * 2.0) + 1.0, jnp.exp(x).sum()
    x = np.array([3.0, -1.0, 2.0, 0.5], np.float32)
    got, want, text = run_both(f, x)
    assert "whole-program kernel" not in text
    assert_close(got, want, rtol=2e-6)


def test_failed_whole_program_compilation_stays_correct(monkeypatch):
    from plax_numba import cache

    def broken(text, arg_types):
        raise RuntimeError("simulated numba failure")
    monkeypatch.setattr(cache, "compile_kernel", broken)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3) + 0.125
    y = np.ones((3, 2), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, want, _ = run_both(_small, x, y)
    assert any(issubclass(w.category, PlaxFallbackWarning) and "simulated" in str(w.message)
               for w in caught)
    assert_close(got, want, rtol=1e-6)


def test_disk_cache_key_covers_the_generated_source():
    from plax_numba import cache, wholegen
    j1 = plax.make_jaxpr(lambda x: jnp.sin(x) @ x.T)(np.ones((2, 3), np.float32)).jaxpr
    j2 = plax.make_jaxpr(lambda x: jnp.cos(x) @ x.T)(np.ones((2, 3), np.float32)).jaxpr
    t1 = cache.module_source(wholegen.plan_program(j1).source, ["x"])
    t2 = cache.module_source(wholegen.plan_program(j2).source, ["x"])
    assert t1 != t2 and cache.source_path(t1) != cache.source_path(t2)


def _cluster_modules(text: str) -> dict:
    """The cluster kernels' module texts a program's ``as_text()`` binds, by name."""
    return dict(re.findall(r"^(k\d+) = load_kernel\('''(.*?)'''\)$", text, re.M | re.S))


def test_programs_sharing_a_cluster_kernel_compile_it_once(monkeypatch):
    # Two different programs (other constants and equations) hold the same cluster kernel,
    # tanh(a + c) summed over a (3, 5) product: it is one module, compiled (or loaded from
    # numba's disk cache) once in this process, and each program's kernel only links it.
    # (numba specialises a callee for the constant extents a program passes: programs share
    # the compiled kernel where those are equal)
    from numba.core.dispatcher import Dispatcher
    from plax_numba import cache
    monkeypatch.setattr(cache, "_kernels", {})   # as a new process: nothing imported yet
    monkeypatch.setattr(cache, "_compiled", {})
    real, added = Dispatcher.compile, []

    def compile(self, sig):  # (counts the overloads it adds: compiled or loaded)
        before = len(self.overloads)
        result = real(self, sig)
        if len(self.overloads) > before:
            added.append(self.py_func.__module__)
        return result
    monkeypatch.setattr(Dispatcher, "compile", compile)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(0.5, -0.5, 20, dtype=np.float32).reshape(5, 4)
    texts = []
    for f in (lambda x, w: jnp.tanh(x @ w.T + 1.0).sum(),
              lambda x, w: jnp.tanh(x @ w.T + 0.5).sum() * 2.0 - x.sum()):
        got, want, text = run_both(f, x, w)
        assert "whole-program kernel" in text
        assert_close(got, want)
        texts.append(text)
    shared = set(_cluster_modules(texts[0]).values()) & set(_cluster_modules(texts[1]).values())
    assert len(shared) == 1, texts
    module = "plax_numba_kernels." + os.path.basename(cache.source_path(shared.pop()))[:-3]
    programs = {"plax_numba_kernels." + os.path.basename(p)[:-3]
                for t in texts for p in re.findall(r"fused kernel \((\S+)\): the whole", t)}
    assert added.count(module) == 1, added
    assert len(programs) == 2 and all(added.count(p) == 1 for p in programs), added


def test_dead_cluster_in_a_loop_body_compiles():
    """A loop body with equations nothing reads (a cluster without outputs) compiles natively,
    without a fallback warning (it once generated ``return (,)``)."""
    def body(c, x):
        dead = jnp.broadcast_to(c, (3,)) * 2.0  # noqa: F841 - traced, never read
        return c * 2 + x, None

    def f(c, xs):
        return lax.scan(body, c, xs)[0]
    xs = np.arange(4, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        got, want, _ = run_both(f, np.float32(1.0), xs)
    assert_close(got, want, rtol=0)


def test_dispatch_steps_are_the_lowerings_own_steps(numba_backend):
    # whole_program_worthwhile's step count is what plax.lowering.lower makes of the program
    # for the Numba emitter's fusion options (plax.lowering.fusion_units): the jit call's
    # body spliced in place, a reduction over a size-1 axis a reshape that the elementwise
    # equations around it are computed before (2 steps for the second program, where a count
    # of find_clusters' own clusters said 4); no kernel is compiled here
    from plax.lowering import Emitter, lower
    from plax_numba.emitter import NumbaEmitter
    from plax_numba.wholegen import dispatch_steps

    class Counting(Emitter):  # the Numba emitter's fusion options, steps that run nothing
        fuses = True
        fuses_multiple_results = NumbaEmitter.fuses_multiple_results
        fuses_index = NumbaEmitter.fuses_index
        fuses_arg_reductions = NumbaEmitter.fuses_arg_reductions
        fuses_cumulative = NumbaEmitter.fuses_cumulative

        def emit_cluster(self, cluster):
            return lambda *bufs: None

        def emit_equation(self, eqn):
            return None if eqn.primitive.name == "jit" else (lambda *bufs: None)

    g = plax.jit(lambda x: jnp.exp(x).sum(axis=0))
    for f in (lambda x: jnp.sin(g(x) * 2.0),
              lambda x: jnp.tanh(x).sum(axis=0, keepdims=True) + x.max(axis=1)):
        jaxpr = plax.make_jaxpr(f)(jnp.ones((1, 4))).jaxpr
        source = lower(jaxpr, Counting(), numba_backend, plax.devices("cpu")[0]).__plax_source__
        steps = source.count(" = _f")
        assert dispatch_steps(jaxpr) == (steps, False), source

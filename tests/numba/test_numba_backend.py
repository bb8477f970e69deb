"""The Numba backend: fused kernels against the NumPy backend, broadcasting, reductions, the
fallback paths, tiered compilation and the generated source."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax import numpy as jnp
from plax.lowering import PlaxFallbackWarning

from numba_vs_numpy import broadcasting_program, compiled_source, jit_both as both


@pytest.fixture(autouse=True)
def per_cluster_kernels(monkeypatch):
    """This module tests the per-cluster kernels: no whole-program kernels (those are tested
    in test_whole_program.py)."""
    monkeypatch.setenv("PLAX_NUMBA_WHOLE_MAX", "0")


def selu(x):
    return 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)


def test_backend_shares_cpu_devices(numba_backend):
    assert numba_backend.platform == "cpu"
    assert numba_backend.devices() == plax.devices("cpu")
    assert numba_backend.priority > plax.plugins.registry().get_backend("numpy").priority


def test_fused_chain_matches_numpy():
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    (got,), (want,) = both(selu, x)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    source = compiled_source(selu, x)
    assert "def kernel" in source and "exp_f32" in source  # one fused loop


def test_integer_chain_is_bit_identical():
    x = np.array([-7, -1, 0, 1, 7, 2**31 - 1, -2**31, 12345], np.int32)
    y = np.array([2, -1, 0, 3, -2, -1, -1, 0], np.int32)

    def f(x, y):
        a = lax.div(x, y) + lax.rem(x, y) * 3
        b = lax.shift_left(x, y & 31) ^ lax.shift_right_logical(x, y) ^ lax.shift_right_arithmetic(x, y)
        c = jnp.where(x > y, a, b) * x
        return c, (c.astype(jnp.float32) * 0.5).astype(jnp.int32), lax.integer_pow(x, 3) - x
    got, want = both(f, x, y)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_conversions_saturate_like_xla():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 0.0], np.float32)
    f = lambda x: ((x * 1.0).astype(jnp.int32), (x + 0).astype(jnp.uint8), x * 2 > 1)  # noqa: E731
    got, want = both(f, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_broadcasting_and_scalars():
    f, args = broadcasting_program()
    (got,), (want,) = both(f, *args)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert "fused kernel" in compiled_source(f, *args)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_reductions_consume_the_chain(axis):
    x = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    x[2, 3] = np.nan

    def f(x):
        y = jnp.tanh(x) * 2.0 + 1.0
        return jnp.sum(y, axis=axis), jnp.max(y, axis=axis), jnp.min(jnp.abs(y), axis=axis)
    got, want = both(f, x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_integer_and_bool_reductions():
    x = np.arange(-10, 14, dtype=np.int32).reshape(4, 6)
    f = lambda x: (jnp.sum(x * 3, axis=0), jnp.max(x + 1), jnp.all(x > -20, axis=1),  # noqa: E731
                   jnp.any(x == 5))
    got, want = both(f, x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_empty_and_rank0_clusters():
    e = np.zeros((0, 3), np.float32)
    got, want = both(lambda x: (jnp.exp(x) * 2, jnp.sum(x * x)), e)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    got, want = both(lambda x: jnp.sin(x) * x + 1.0, np.float32(0.5))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[0].dtype == np.float32 and got[0].shape == ()


def test_prng_bits_are_identical():
    key = random.PRNGKey(42)
    f = lambda k: (random.bits(k, (1000,)), random.normal(k, (1000,)), random.uniform(k, (7, 3)))  # noqa: E731
    got, want = both(f, key)
    np.testing.assert_array_equal(got[0], want[0])
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_control_flow_and_dot():
    def f(x, w):
        def body(i, c):
            return jnp.tanh(c @ w) * 0.5 + c
        return lax.fori_loop(0, 5, body, x), lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x)
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    w = np.random.default_rng(2).normal(size=(8, 8)).astype(np.float32) / 4
    got, want = both(f, x, w)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6)


def test_unknown_primitive_falls_back_with_one_warning():
    import plax_numpy
    from plax.core import Primitive
    from plax.core.shaped_array import ShapedArray
    twice_p = Primitive("numba_test_twice")
    twice_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    plax_numpy.register_impl(twice_p, lambda x: x * 2)
    f = plax.jit(lambda x: twice_p.bind(x) + 1.0, backend="numba")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0, 3.0])
    msgs = [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)]
    assert len(msgs) == 1 and "numba_test_twice" in msgs[0] and "'numba'" in msgs[0]


def test_failed_compilation_warns_and_stays_correct(monkeypatch):
    from plax_numba import cache

    def broken(text, arg_types):
        raise RuntimeError("simulated numba failure")
    monkeypatch.setattr(cache, "compile_kernel", broken)
    g = lambda x: jnp.cos(x) * 3.0 - x  # noqa: E731
    x = np.linspace(0, 1, 5, dtype=np.float32)
    with pytest.warns(PlaxFallbackWarning, match=r"cos mul sub.*generated source: .*k_.*\.py.*simulated"):
        out = plax.jit(g, backend="numba")(x)
    np.testing.assert_allclose(np.asarray(out), np.cos(x) * 3 - x, rtol=1e-6)


def _cluster_step_state(f):
    """``[(ready, kernel)]`` of the cluster steps of jitted ``f``'s one compiled program."""
    (entry,) = f._cache.values()
    glob = entry.executable.__globals__
    steps = [v for k, v in glob.items() if k.startswith("_f") and hasattr(v, "__globals__")
             and "_ready" in v.__globals__]
    return [(s.__globals__["_ready"], s.__globals__["_kernel"]) for s in steps]


def test_tiered_compilation_switches_to_the_kernel(monkeypatch, tmp_path):
    from plax_numba import cache, tiered
    # an empty kernel cache: a kernel found on disk would load at once, from the first call
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    f = plax.jit(lambda x: jnp.sqrt(x * x + 2.75) - x * 0.125 + jnp.cos(x) ** 3, backend="numba")
    x = np.arange(100, dtype=np.float32)
    first = np.asarray(f(x))  # the reference kernels: the cluster is not hot yet
    assert tiered.wait_idle(timeout=120)
    assert [ready for ready, _ in _cluster_step_state(f)] == [False]
    second = np.asarray(f(x))  # hot: compiles in the background, this call interprets
    assert tiered.wait_idle(timeout=120)
    assert [ready for ready, _ in _cluster_step_state(f)] == [True]
    later = np.asarray(f(x))
    for y in (second, later):
        np.testing.assert_allclose(first, y, rtol=1e-6)
    np.testing.assert_allclose(later, np.sqrt(x * x + 2.75) - x * 0.125 + np.cos(x) ** 3,
                               rtol=1e-5)
    # a new program with the same cluster uses the compiled kernel at once
    g = plax.jit(lambda y: jnp.sqrt(y * y + 2.75) - y * 0.125 + jnp.cos(y) ** 3, backend="numba")
    g(x)
    assert [ready for ready, _ in _cluster_step_state(g)] == [True]


def test_generated_source_shows_the_kernels():
    x = np.ones((2, 3), np.float32)
    source = compiled_source(lambda x: jnp.exp(x).sum(axis=1) * 2.0, x)
    assert "@njit" in source and "def kernel" in source and "def _compiled" in source


def test_compiled_as_text_shows_the_kernels():
    x = np.ones((2, 3), np.float32)
    text = plax.jit(lambda x: jnp.exp(x) * 2.0 + 1.0, backend="numba").lower(x).compile().as_text()
    assert "def _compiled(" in text and "def kernel" in text and "@njit" in text, text


def test_backend_info(numba_backend):
    import numba
    info = numba_backend.info()
    assert info["numba"] == numba.__version__
    assert info["threads"] == numba.get_num_threads() >= 1
    assert isinstance(info["threading layer"], str) and info["threading layer"]


def test_plax_info_prints_backend_info():
    import subprocess
    import sys
    from importlib.metadata import entry_points
    if "numba" not in {ep.name for ep in entry_points(group="plax.backends")}:
        pytest.skip("the numba entry point is not installed (pip install -e .)")
    import numba
    proc = subprocess.run([sys.executable, "-m", "plax", "info"], capture_output=True,
                          text=True, check=True, timeout=120)
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("backend numba: ")]
    assert f"numba {numba.__version__}, threading layer " in line and ", threads " in line


def test_info_lines_survive_a_failing_backend():
    from plax.__main__ import backend_info_lines

    class Broken:
        def info(self):
            raise RuntimeError("no luck")

    class Quiet:
        pass

    class Reg:
        backends = {"b": Broken(), "q": Quiet(), "numba": plax.plugins.registry().get_backend("numba")}
    lines = backend_info_lines(Reg())
    assert lines[0] == "backend b: info() failed: RuntimeError: no luck"
    assert lines[1].startswith("backend numba: numba ") and len(lines) == 2


def test_large_flat_clusters_run_in_parallel():
    """Flat loops of at least ``codegen.PARALLEL_MIN`` elements use ``prange``; smaller ones,
    and clusters with a reduction (whose order must not change), the serial loop."""
    from plax_numba import codegen
    big = np.linspace(-4, 4, codegen.PARALLEL_MIN, dtype=np.float32)
    small = big[:1000]
    assert "prange(" in compiled_source(selu, big) and "prange(" not in compiled_source(selu, small)
    for x in (big, small):
        (got,), (want,) = both(selu, x)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=4e-7)

    def f(x):
        y = jnp.tanh(x) * 2.0
        return y, jnp.sum(y * x), lax.logistic(x)
    kernels = compiled_source(f, big).split("# ---- fused kernel")[1:]
    assert any("reduce_sum" in k for k in kernels)
    assert all("prange(" not in k for k in kernels if "reduce_sum" in k)
    serial = plax.jit(f, backend="numba")(small)
    (y, s, lg), (wy, ws, wlg) = both(f, big)
    np.testing.assert_allclose(y, wy, rtol=4e-7, atol=1e-7)
    np.testing.assert_allclose(lg, wlg, rtol=4e-7, atol=1e-7)
    np.testing.assert_allclose(s, ws, rtol=1e-6)
    assert np.asarray(serial[0]).shape == small.shape


def test_programs_with_threaded_blas_products_keep_their_loops_serial():
    """A program with a matrix product above ``kernels.BLAS_THREADED_MIN`` multiply-adds
    compiles even its large clusters without ``prange`` (BLAS's spinning threads hold the
    cores); with a product of exactly that size, the clusters keep ``prange``. Results match
    the reference either way."""
    from plax_numba import codegen, kernels
    big = np.linspace(-4, 4, codegen.PARALLEL_MIN, dtype=np.float32)
    rng = np.random.default_rng(0)

    def f(a, m, x):
        return selu(a), jnp.tanh(m @ x)
    for k, threaded in ((kernels.BLAS_THREADED_MIN // 64 + 1, True),
                        (kernels.BLAS_THREADED_MIN // 64, False)):
        m = rng.standard_normal((8, k)).astype(np.float32)      # 8 x k @ k x 8: 64 k
        x = rng.standard_normal((k, 8)).astype(np.float32)
        assert ("prange(" in compiled_source(f, big, m, x)) is not threaded
        (g1, g2), (w1, w2) = both(f, big, m, x)
        np.testing.assert_allclose(g1, w1, rtol=2e-6, atol=4e-7)
        np.testing.assert_allclose(g2, w2, rtol=1e-4, atol=1e-5)


def test_parallel_kernels_yield_to_spinning_blas_threads():
    """After a product on BLAS's threads (recorded by the program's product step), a
    ``prange`` kernel runs on one numba thread until ``kernels.BLAS_SPIN_SECONDS`` have
    passed; otherwise on all of them. The thread count is restored either way."""
    import numba
    from plax_numba import kernels
    seen = []

    def kernel(*args):
        seen.append(numba.get_num_threads())
        return args
    run = kernels.yielding_to_blas(kernel)
    before = numba.get_num_threads()
    clock = kernels._last_threaded_product  # the clock the steps share
    saved = clock[0]
    try:
        clock[0] = -np.inf
        run(1)
        kernels.noting_threaded_product(lambda a, b: a @ b)(np.ones((2, 2)), np.ones((2, 2)))
        assert clock[0] > 0
        clock[0] = np.inf  # a product "just finished", however slowly this test runs
        assert kernels.blas_threads_spinning()
        run(2)
        assert seen == [before, 1] and numba.get_num_threads() == before
        # a jitted product big enough for BLAS's threads records it (one run on a single
        # BLAS thread, kernels.BLAS_SERIAL_MAX, does not: no workers spin after it)
        clock[0] = 0.0
        k = kernels.BLAS_THREADED_MIN // 64 + 1
        m = np.ones((8, k), np.float32)
        plax.jit(lambda a, b: a @ b, backend="numba")(m, m.T)
        assert clock[0] == 0.0
        k = kernels.BLAS_SERIAL_MAX // 64 + 1
        m = np.ones((8, k), np.float32)
        plax.jit(lambda a, b: a @ b, backend="numba")(m, m.T)
        assert clock[0] > 0
    finally:
        clock[0] = saved


def test_numba_backend_limits_its_threads_per_calling_thread():
    import numba
    backend = plax.plugins.registry().get_backend("numba")
    before = numba.get_num_threads()
    with backend.threads_limited(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    numpy_backend = plax.plugins.registry().get_backend("numpy")
    with numpy_backend.threads_limited(1):  # the default: nothing to limit
        pass


def test_large_lone_equations_without_a_ufunc_compile_to_a_kernel():
    """A lone ``logistic`` (no NumPy ufunc: its reference kernel makes several passes) of at
    least ``emitter.LONE_KERNEL_MIN`` elements becomes a one-equation kernel; a small one,
    and a lone equation with a ufunc (``exp``), keep their NumPy kernels."""
    from plax_numba import emitter
    n = emitter.LONE_KERNEL_MIN
    big = np.linspace(-30, 30, n, dtype=np.float32)
    src = compiled_source(lax.logistic, big)
    assert "fused kernel" in src and "logistic" in src.split("fused kernel")[1]
    assert "fused kernel" not in compiled_source(lax.logistic, big[: n // 2])
    assert "fused kernel" not in compiled_source(jnp.exp, big)
    (got,), (want,) = both(lax.logistic, big)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-30)


@pytest.mark.parametrize("fn", [
    lax.logistic, lax.rsqrt, jnp.sign, jnp.round, lambda x: lax.integer_pow(x, 3),
    lambda x: x.astype(jnp.int32), lambda x: lax.clamp(-1.0, x, 2.0),
    lambda x: lax.select_n(x > 0, x, -x), lambda x: lax.select_n(x > 0, x, x),
    lambda x: lax.nextafter(x, jnp.float32(0)), lambda x: lax.rem(x.astype(jnp.int32), 7),
    lambda x: lax.div(x.astype(jnp.int32), 3),
], ids=["logistic", "rsqrt", "sign", "round", "integer_pow", "convert", "clamp", "select",
        "select_same", "nextafter", "rem_int", "div_int"])
def test_large_lone_equations_match_the_reference(fn):
    from plax_numba import emitter
    x = np.linspace(-50, 50, emitter.LONE_KERNEL_MIN + 3, dtype=np.float32)
    got, want = both(fn, x)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=3e-7, atol=1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_at_negative_zero_and_infinity_is_ieee(dtype):
    # NumPy's array power takes x ** 0.5 as sqrt(x): -0 and nan at -0 and -inf; IEEE pow (XLA,
    # the Array API, the NumPy backend) gives +0 and +inf wherever y is not an odd integer
    if not plax.config.read("enable_x64") and dtype == np.float64:
        dtype = np.float32
    x = jnp.array([-0.0, -np.inf, 4.0, -np.inf, -0.0, -8.0], dtype)
    y = jnp.array([0.5, -0.5, 0.5, 3.0, 3.0, 2.0], dtype)
    for f, args in ((lambda a: a ** 0.5, (x,)), (jnp.power, (x, y))):
        got, want = both(f, *args, fallback_is_error=True)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))
    np.testing.assert_array_equal(np.asarray(plax.jit(lambda a: a ** 0.5, backend="numba")(x))[:2],
                                  np.array([0.0, np.inf], dtype))

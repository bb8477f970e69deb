"""The numba-free kernel loader (issue 26, item 2): kernels the compile worker emits as native
object code (:mod:`plax_numba.native_emit`) load in the program's process with llvmlite alone
(:mod:`plax_numba.native_loader`). Values are checked against NumPy float64 and the NumPy
backend; no timing is asserted. Processes that must not import numba run as children."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or sys.maxsize < 2 ** 32,
    reason="the native loader links ELF objects: 64-bit Linux only (elsewhere kernels load "
           "through numba)")

_KERNEL = '''
@njit(**_OPTIONS)
def kernel(a, s, b, n):
    o = np.empty(n, np.float32)
    acc = 0.0
    for i in range(n):
        o[i] = np.float32(np.exp(a[i]) * s)
        acc += o[i]
    return o, np.float32(acc), b
'''
_ARG_TYPES = [("array", np.dtype(np.float32), 1), ("scalar", np.dtype(np.float32)),
              ("rarray", np.dtype(np.int32), 2), ("int",)]


def _run(code: str, env: dict) -> dict:
    """Runs ``code`` in a fresh interpreter (this one's ``sys.path``); returns the JSON its
    last output line prints."""
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for k in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_WORKERS", "PLAX_NUMBA_NATIVE"):
        if k not in env:
            full.pop(k, None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """A kernel allocating its result (numba's runtime), returning an array, a scalar and
    one of its inputs, emitted as the worker does (once for the module); its cache
    directory and artifact path."""
    from plax_numba import cache, native_emit
    tmp_path = tmp_path_factory.mktemp("emitted")
    old = cache._dir
    cache._dir = str(tmp_path)
    try:
        text = cache.module_source(_KERNEL, ["exp", "mul"])
        cache.compile_for_cache(text, _ARG_TYPES, native=True)
        path = native_emit.artifact_path(cache._marker(text, _ARG_TYPES))
    finally:
        cache._dir = old
    return tmp_path, path


def test_loads_without_numba_and_matches_numpy(emitted):
    directory, path = emitted
    out = _run(f"""
        import json, sys
        import numpy as np
        from plax_numba import native_loader
        k = native_loader.load({path!r})
        a = np.linspace(-2, 2, 1001, dtype=np.float32)
        b = np.arange(6, dtype=np.int32).reshape(2, 3)
        o, total, same = k.function(a, np.float32(1.5), b, a.size)
        refs = sys.getrefcount(b)
        for _ in range(200):  # the returned input: one reference per result, none kept
            k.function(a, np.float32(1.5), b, a.size)
        print(json.dumps({{"o": o.tolist(), "dtype": str(o.dtype), "total": float(total),
                          "same": same is b, "numba": "numba" in sys.modules,
                          "refs_kept": sys.getrefcount(b) - refs,
                          "fallbacks": native_loader.fallbacks}}))
        """, {})
    assert not out["numba"] and out["fallbacks"] == {}
    a = np.linspace(-2, 2, 1001, dtype=np.float32)
    want = np.exp(a.astype(np.float64)) * 1.5
    assert out["dtype"] == "float32"
    np.testing.assert_allclose(out["o"], want, rtol=3e-7 * 4)
    np.testing.assert_allclose(out["total"], want.sum(), rtol=1e-5)
    assert out["same"]  # an input returned as it is: the same object, as numba returns it
    assert out["refs_kept"] == 0


def test_a_loaded_kernels_method_definition_outlives_what_frees_it(emitted):
    # CPython reads a builtin function's method definition until the function is freed (its
    # repr, the garbage collector's traversal, its deallocation). At interpreter exit the
    # loader's module globals are cleared, and the collector clears the programs holding the
    # functions, in any order; a definition that either freed was read after being freed (a
    # SIGSEGV at exit in CI). The child does both, then: glibc's MALLOC_PERTURB_ fills freed
    # memory with junk, so a definition read after free crashes it.
    directory, path = emitted
    out = _run(f"""
        import gc, json
        import numpy as np
        from plax_numba import native_loader
        k = native_loader.load({path!r})
        a = np.linspace(-2, 2, 101, dtype=np.float32)
        b = np.zeros((1, 1), np.int32)
        native_loader._keep.clear()
        gc.collect()
        name = repr(k.function)
        o, total, _ = k.function(a, np.float32(2.0), b, a.size)
        cycle = [k.function]     # (garbage the collector must clear, as at exit)
        cycle.append(cycle)
        del k, cycle
        gc.collect()
        print(json.dumps({{"o": o.tolist(), "named": "built-in" in name}}))
        """, {"PYTHONMALLOC": "malloc", "MALLOC_PERTURB_": "2"})
    assert out["named"]
    a = np.linspace(-2, 2, 101, dtype=np.float32).astype(np.float64)
    np.testing.assert_allclose(out["o"], np.exp(a) * 2.0, rtol=3e-7 * 4)


_PARALLEL_KERNEL = '''
@njit(**_PARALLEL)
def kernel(a, o, n):
    for i in prange(n):
        o[i] = np.float32(np.tanh(a[i]) * np.float32(3.0) + np.float32(0.5))
    return 0
'''


def test_parallel_kernel_runs_on_the_threading_layer_without_numba(tmp_path):
    from plax_numba import cache, native_emit
    arg_types = [("array", np.dtype(np.float32), 1), ("array", np.dtype(np.float32), 1),
                 ("int",)]
    old = cache._dir
    cache._dir = str(tmp_path)
    try:
        text = cache.module_source(_PARALLEL_KERNEL, ["tanh", "mul", "add"])
        cache.compile_for_cache(text, arg_types, native=True)
        path = native_emit.artifact_path(cache._marker(text, arg_types))
    finally:
        cache._dir = old
    out = _run(f"""
        import json, sys
        import numpy as np
        from plax_numba import native_loader
        k = native_loader.load({path!r})
        a = np.linspace(-3, 3, 100_003, dtype=np.float32)
        o = np.empty_like(a)
        k.function(a, o, a.size)
        get, set_ = native_loader.thread_count_functions()
        threads = get()
        set_(1)
        one = np.empty_like(a)
        k.function(a, one, a.size)
        set_(threads)
        from plax_numba import kernels
        kernels._last_threaded_product[0] = float("inf")  # as if BLAS's threads were spinning
        wrapped = kernels.yielding_to_blas(k.function)  # (its thread counts: no numba)
        two = np.empty_like(a)
        wrapped(a, two, a.size)
        from plax_numba.backend import NumbaBackend
        backend = NumbaBackend()
        with backend.threads_limited(1):  # pmap's device threads limit the layer, not numba
            limited = get()
        print(json.dumps({{"o": o[::97].tolist(), "same": bool((o == one).all()
                                                              and (o == two).all()),
                          "threads": threads, "numba": "numba" in sys.modules,
                          "limited": limited, "restored": get(),
                          "fallbacks": native_loader.fallbacks}}))
        """, {})
    assert not out["numba"] and out["fallbacks"] == {} and out["threads"] >= 1
    assert out["limited"] == 1 and out["restored"] == out["threads"]
    assert out["same"]  # one thread or all: an elementwise loop gives the same bits
    a = np.linspace(-3, 3, 100_003, dtype=np.float32)[::97].astype(np.float64)
    np.testing.assert_allclose(out["o"], np.tanh(a) * 3 + 0.5, rtol=1e-6, atol=1e-6)


def test_wrong_arguments_raise_type_error_not_wrong_results(emitted):
    from plax_numba import native_loader
    _, path = emitted
    kernel = native_loader.load(path)
    assert kernel is not None, native_loader.fallbacks
    a = np.linspace(-2, 2, 64, dtype=np.float32)
    b = np.zeros((2, 3), np.int32)
    for bad in [(a.astype(np.float64), np.float32(1), b, 64),   # dtype
                (a[::2], np.float32(1), b, 32),                  # not contiguous
                (a.reshape(8, 8), np.float32(1), b, 64),         # rank
                (list(a), np.float32(1), b, 64),                 # not an array
                (a, np.float32(1), b)]:                          # argument count
        with pytest.raises(TypeError, match="compiled for"):
            kernel.function(*bad)
    with pytest.raises(TypeError):
        kernel.function(a, "1.5", b, 64)


def test_unloadable_artifacts_fall_back_and_are_counted(tmp_path, emitted):
    import pickle
    from plax_numba import native_emit, native_loader
    assert native_loader.load(str(tmp_path / "absent.native")) is None
    _, path = emitted
    with open(path, "rb") as f:
        artifact = pickle.load(f)
    broken = dict(artifact, undefined=artifact["undefined"] + ["plax_no_such_symbol"])
    odd = tmp_path / "odd.native"
    odd.write_bytes(pickle.dumps(broken))
    before = dict(native_loader.fallbacks)
    assert native_loader.load(str(odd)) is None  # never linked: LLVM would abort on it
    reasons = [k for k in native_loader.fallbacks if native_loader.fallbacks[k] !=
               before.get(k, 0)]
    assert any("plax_no_such_symbol" in r for r in reasons)
    native_emit.not_emitted(str(odd), native_emit.NotEmitted("a kernel kind"))
    assert native_loader.load(str(odd)) is None
    assert native_loader.fallbacks.get("a kernel kind") == 1


# (plax's own kernels no longer use object mode: plax_numba.numpy_calls calls NumPy's loops
# natively; this one keeps the emitter's guard tested)
_OBJECT_MODE_KERNEL = '''
from numba import objmode


@njit(cache=True)
def kernel(a, n):
    with objmode(y="float32[::1]"):
        y = np.ascontiguousarray(np.log1p(a))
    return (y, )
'''


def test_object_mode_kernels_are_not_emitted_and_load_through_numba(tmp_path):
    # numba's object mode calls Python objects from numba's Environment, which only
    # numba's loader fills in: linked natively the kernel raised "missing Environment" at
    # its first call (random.normal's program did, when its log1p ran in object mode).
    import pickle
    from plax_numba import cache, native_emit, native_loader
    arg_types = [("array", np.dtype(np.float32), 1), ("int",)]
    old = cache._dir
    cache._dir = str(tmp_path)
    try:
        text = cache.module_source(_OBJECT_MODE_KERNEL, ["log1p"])
        cache.compile_for_cache(text, arg_types, native=True)
        path = native_emit.artifact_path(cache._marker(text, arg_types))
    finally:
        cache._dir = old
    with open(path, "rb") as f:
        artifact = pickle.load(f)
    assert "object mode" in artifact.get("unsupported", ""), artifact.keys()
    assert native_loader.load(path) is None
    assert any("object mode" in reason for reason in native_loader.fallbacks)


def test_undefined_symbols_are_read_from_the_object(emitted):
    import pickle
    from plax_numba import native_emit
    _, path = emitted
    with open(path, "rb") as f:
        artifact = pickle.load(f)
    undefined, defined = native_emit.symbols(artifact["objects"][1])
    assert artifact["entry"] in defined and "PyTuple_New" in undefined
    assert "NRT_MemInfo_alloc_aligned" in artifact["undefined"]  # np.empty: numba's runtime
    with pytest.raises(native_emit.NotEmitted):
        native_emit.symbols(b"not an object")


_CALLING_KERNEL = '''
@njit(**_OPTIONS)
def kernel(a, x, o, n):
    for i in range(n):
        o[i] = lgamma_f32_once(a[i]) + igamma_f32(a[i], x[i])
    return 0
'''


def test_compiled_once_functions_travel_in_the_artifact(tmp_path):
    # A kernel calling compiled-once functions (a twin and an always-called iterative form)
    # carries their object code; a process without numba links each once, however many
    # kernels call it, and gets numba's bits.
    import pickle
    from plax_numba import cache, compiled_once, libm_free, native_emit, special_gamma
    arg_types = [("array", np.dtype(np.float32), 1)] * 3 + [("int",)]
    old = cache._dir
    cache._dir = str(tmp_path)
    try:
        paths = []
        for variant in ("", "\n# a second kernel calling the same functions\n"):
            text = cache.module_source(_CALLING_KERNEL + variant, ["lgamma", "igamma"])
            cache.compile_for_cache(text, arg_types, native=True)
            paths.append(native_emit.artifact_path(cache._marker(text, arg_types)))
    finally:
        cache._dir = old
    with open(paths[0], "rb") as f:
        artifact = pickle.load(f)
    symbols = {libm_free.lgamma_f32_once.symbol, special_gamma.igamma_f32.symbol}
    assert set(artifact["compiled_once"]) == symbols
    assert symbols <= set(artifact["undefined"])
    for symbol, entry in artifact["compiled_once"].items():
        assert entry["function"] in native_emit.symbols(entry["object"])[1]
        assert not any(s.startswith(compiled_once.SYMBOL_PREFIX) for s in entry["undefined"])
    out = _run(f"""
        import json, sys
        import numpy as np
        from plax_numba import native_loader
        a = np.linspace(0.05, 12, 997, dtype=np.float32)
        x = np.linspace(0.0, 20, 997, dtype=np.float32)[::-1].copy()
        outs = []
        for path in {paths!r}:
            o = np.empty_like(a)
            native_loader.load(path).function(a, x, o, a.size)
            outs.append(o.view(np.uint32).tolist())
        print(json.dumps({{"outs": outs, "numba": "numba" in sys.modules,
                          "linked": native_loader.stats.get("compiled_once", 0),
                          "fallbacks": native_loader.fallbacks}}))
        """, {})
    assert not out["numba"] and out["fallbacks"] == {}
    assert out["linked"] == 2  # each function once, not once per kernel
    a = np.linspace(0.05, 12, 997, dtype=np.float32)
    x = np.linspace(0.0, 20, 997, dtype=np.float32)[::-1].copy()
    want = np.array([libm_free.lgamma_f32(v) + special_gamma.igamma_f32(v, w)
                     for v, w in zip(a, x)], np.float32)
    for got in out["outs"]:
        assert got == want.view(np.uint32).tolist()


# A small program (an elementwise kernel, a reduction, a blocked cumsum) and a lone threefry2x32 (the fixed
# kernels of plax_numba.threefry, serial below PARALLEL_MIN elements and parallel above): all
# the kernel kinds the worker emits, compiled in seconds. (The samplers' programs, whose
# kernels call NumPy's log1p loop natively, are tested in test_random_native_load.py.)
_PROGRAM = """
    import json, os, sys, time
    import numpy as np
    import plax
    from plax import lax, numpy as jnp
    from plax_numba import cache, native_loader, tiered

    backend = os.environ["BACKEND"]
    small = plax.jit(lambda x: (jnp.tanh(x * 1.5) + 0.5, jnp.sum(x * x)), backend=backend)
    scan = plax.jit(lambda x: jnp.cumsum(x * 3.0), backend=backend)
    hash_ = plax.jit(lambda a, b, c, d: lax.threefry2x32_p.bind(a, b, c, d), backend=backend)
    x = np.linspace(-2, 2, 301, dtype=np.float32)
    keys = np.uint32(7), np.uint32(42)
    big = np.arange(70_000, dtype=np.uint32)  # (above PARALLEL_MIN: the parallel kernel)
    calls = [lambda: small(x), lambda: (scan(x),), lambda: hash_(*keys, big, big[::-1].copy()),
             lambda: hash_(*keys, big[:1000], big[1000:2000].copy())]
    outs = [call() for call in calls]
    if backend == "numba":
        deadline = time.monotonic() + 300
        while not tiered.wait_idle(0) and time.monotonic() < deadline:
            # (blocked while the worker compiles, not calling the reference path in a spin)
            tiered.wait_idle(max(0.0, deadline - time.monotonic()))
            outs = [call() for call in calls]
        outs = [call() for call in calls]
    flat = [np.asarray(a).tolist() for out in outs for a in out]
    print(json.dumps({"out": flat, "numba": "numba" in sys.modules,
                      "native": native_loader.stats["loaded"],
                      "fallbacks": native_loader.fallbacks,
                      "loaded": cache.load_stats["loaded"]}))
"""


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """One cold run of :data:`_PROGRAM` (the worker compiles into an empty cache, this
    process links natively), shared by the tests needing a warm cache: its environment and
    its result."""
    env = {"PLAX_NUMBA_CACHE_DIR": str(tmp_path_factory.mktemp("native_cache")),
           "PLAX_NUMBA_COMPILE_AFTER": "1"}
    # (freed memory filled with junk: this run, whose kernels load from the background
    # thread, read a freed method definition at exit while definitions lived in ctypes
    # objects; see test_a_loaded_kernels_method_definition_outlives_what_frees_it)
    return env, _run(_PROGRAM, dict(env, BACKEND="numba", PYTHONMALLOC="malloc",
                                    MALLOC_PERTURB_="2"))


def _check_values(run: dict) -> None:
    """The small program against NumPy float64; the hashes against the NumPy backend (bits)."""
    from plax import lax
    import plax
    x = np.linspace(-2, 2, 301, dtype=np.float32).astype(np.float64)
    np.testing.assert_allclose(run["out"][0], np.tanh(x * 1.5) + 0.5, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(run["out"][1], (x * x).sum(), rtol=1e-5)
    # (the blocked scan, compiled once: its object code travels in the kernel's artifact)
    np.testing.assert_allclose(run["out"][2], np.cumsum(x * 3.0), rtol=1e-5, atol=1e-4)
    hash_ = plax.jit(lambda a, b, c, d: lax.threefry2x32_p.bind(a, b, c, d), backend="numpy")
    big = np.arange(70_000, dtype=np.uint32)
    keys = np.uint32(7), np.uint32(42)
    want = [*hash_(*keys, big, big[::-1].copy()), *hash_(*keys, big[:1000], big[1000:2000])]
    for got, ref in zip(run["out"][3:], want):
        assert got == np.asarray(ref).tolist()


def test_cold_and_warm_starts_run_native_kernels_without_importing_numba(cold):
    # Cold: the worker compiles the kernels, threefry's included, and this process links
    # them. Warm: they link when the program is built. Neither imports numba.
    env, cold_run = cold
    warm_run = _run(_PROGRAM, dict(env, BACKEND="numba"))
    for run in (cold_run, warm_run):
        assert not run["numba"], run
        assert run["fallbacks"] == {} and run["native"] >= 3 and run["native"] == run["loaded"]
        _check_values(run)


def test_native_loader_off_loads_the_same_kernels_through_numba(cold):
    env, _ = cold
    off = _run(_PROGRAM, dict(env, BACKEND="numba", PLAX_NUMBA_NATIVE="0"))
    assert off["numba"] and off["native"] == 0 and off["loaded"] >= 1
    _check_values(off)


def test_a_loader_error_falls_back_to_numba_not_to_a_failed_kernel(monkeypatch, tmp_path):
    # A bug or surprise in the native loader costs only the loader: the kernel loads through
    # numba (counted), no fallback warning, the values are right.
    import time
    import warnings
    import plax
    from plax import numpy as jnp
    from plax_numba import cache, native_loader, tiered
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_WORKERS", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_NATIVE", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1")
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})

    def broken(path):
        raise RuntimeError("the loader broke")
    monkeypatch.setattr(native_loader, "load", broken)
    x = np.linspace(-2, 2, 515, dtype=np.float32)
    f = plax.jit(lambda x: jnp.exp(x * 0.375) * 1.25 - x, backend="numba")
    before = cache.load_stats["loaded"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        f(x)
        deadline = time.monotonic() + 300
        while cache.load_stats["loaded"] == before:
            assert time.monotonic() < deadline, "the kernel never loaded"
            f(x)
            tiered.wait_idle(timeout=1.0)
        out = np.asarray(f(x))
    assert any("the loader broke" in k for k in native_loader.fallbacks)
    want = np.exp(x.astype(np.float64) * 0.375) * 1.25 - x
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)

"""The samplers' kernels call NumPy's own ``log1p`` loop natively (issue 26):
:mod:`plax_numba.numpy_calls` calls the C loop NumPy's ufunc runs, by a symbol
:mod:`plax_numba.numpy_loops` registers, instead of numba's object mode. So their bits stay
NumPy's, and jitted ``random`` programs load from a warm disk cache in a process that never
imports numba. Values against ``np.log1p`` and the NumPy backend, bit for bit; no timing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_LINUX_64 = sys.platform.startswith("linux") and sys.maxsize > 2 ** 32


def _inputs(dtype) -> np.ndarray:
    """Dense values over log1p's domain and its edges (the pole, signed zeros, infinities,
    NaN, tiny and huge values, just above -1), in an odd length (a partial SIMD vector)."""
    rng = np.random.default_rng(26)
    edges = [-1.0, -0.0, 0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -2.0,
             np.nextafter(dtype(-1), dtype(0)), np.finfo(dtype).tiny, np.finfo(dtype).max]
    return np.concatenate([rng.uniform(-1, 4, 40_001), rng.standard_normal(20_000) * 1e-4,
                           np.exp(rng.uniform(-80, 80, 20_000)), edges]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_calls_give_numpys_log1p_bits(dtype):
    from plax_numba import numpy_calls
    bits = dtype(0).itemsize * 8
    array_call = getattr(numpy_calls, f"log1p_f{bits}")
    scalar_call = getattr(numpy_calls, f"log1p_scalar_f{bits}")
    x = _inputs(dtype)
    uint = np.dtype(f"u{bits // 8}")
    with np.errstate(all="ignore"):
        for values in (x, x[::3], x[:7]):   # contiguous, strided, shorter than a vector
            got, want = array_call(values), np.log1p(values)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got.view(uint), want.view(uint))
        # a scalar is NumPy's loop over one element, as np.log1p of a scalar is (NumPy's SIMD
        # loops may round a lone element differently from the same value inside an array)
        sample = x[::97]
        got = np.array([scalar_call(v) for v in sample], dtype)
        want = np.array([np.log1p(v) for v in sample], dtype)
        np.testing.assert_array_equal(got.view(uint), want.view(uint))


def test_loop_addresses_come_without_numba():
    code = ("import sys; from plax_numba import numpy_loops; a = numpy_loops.addresses(); "
            "print(sorted(a), all(f for f, d in a.values()), 'numba' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["['plax_numpy_loop_log1p_d',", "'plax_numpy_loop_log1p_f']",
                                  "True", "False"]



def test_the_data_cells_kernels_read_outlive_the_modules_objects():
    # Kernels read each loop's data pointer from a cell registered with LLVM by address. At
    # interpreter exit the module's containers are emptied and the collector frees their
    # objects; a daemon thread's kernel may still run. The child empties every container of
    # the module, collects, fills new objects with junk bytes, and reads the cells at their
    # registered addresses: a cell in freed memory reads as junk (the bytes reuse it).
    code = textwrap.dedent("""
        import gc, json, ctypes
        import llvmlite.binding as llvm
        from plax_numba import numpy_loops
        numpy_loops.register(llvm)
        names = {numpy_loops.data_symbol(u, c): (u, c) for u, c in numpy_loops.LOOPS}
        for name, value in list(vars(numpy_loops).items()):
            if not name.startswith("__") and isinstance(value, (dict, list)):
                value.clear()
        gc.collect()
        churn = [b"\\xab" * n for n in range(1, 400) for _ in range(20)]  # (reuses freed memory)
        cells = {n: ctypes.c_void_p.from_address(llvm.address_of_symbol(n)).value or 0
                 for n in names}
        want = {n: numpy_loops._loop(*names[n])[1] for n in names}
        print(json.dumps({"cells": cells, "want": want}))
        """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               PYTHONMALLOC="malloc", MALLOC_PERTURB_="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(got["cells"]) == {"plax_numpy_loop_log1p_f_data", "plax_numpy_loop_log1p_d_data"}
    assert got["cells"] == got["want"]

# Four jitted samplers, small (whole-program kernels: normal's and gamma's call log1p from
# the kernel), run until the compile worker is idle; the last line reports their values and
# how their kernels loaded.
_PROGRAM = """
    import json, sys, time
    import numpy as np
    import plax
    from plax import random
    from plax_numba import cache, native_loader, tiered

    key = random.PRNGKey(3)
    programs = [lambda k: random.normal(k, (5, 7)),
                lambda k: random.uniform(k, (33,), minval=-2.0, maxval=3.0),
                lambda k: random.truncated_normal(k, -1.5, 2.0, (40,)),
                lambda k: random.gamma(k, np.array([0.3, 1.0, 2.5, 7.0], np.float32))]
    fns = [plax.jit(p, backend="numba") for p in programs]
    outs = [f(key) for f in fns]
    deadline = time.monotonic() + 400
    while not tiered.wait_idle(0) and time.monotonic() < deadline:
        # (blocked while the worker compiles: calls spinning on the reference path took as
        # much CPU as the compile, and its GIL; then a round of calls loads what it made)
        tiered.wait_idle(max(0.0, deadline - time.monotonic()))
        outs = [f(key) for f in fns]
    outs = [np.asarray(f(key)) for f in fns]
    print(json.dumps({"out": [o.ravel().tolist() for o in outs],
                      "numba": "numba" in sys.modules, "native": native_loader.stats["loaded"],
                      "fallbacks": native_loader.fallbacks,
                      "loaded": cache.load_stats["loaded"]}))
"""


def _run(env: dict) -> dict:
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for k in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_WORKERS", "PLAX_NUMBA_NATIVE",
              "PLAX_NUMBA_FIRST_TIER"):
        full.pop(k, None)
    # freed memory filled with junk (glibc): these runs crashed at exit reading a kernel's
    # freed method definition (test_native_loader.py's test of it says how)
    full.update(PYTHONMALLOC="malloc", MALLOC_PERTURB_="2")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_PROGRAM)], env=full,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _LINUX_64, reason="the native loader links ELF objects: 64-bit "
                    "Linux only (elsewhere kernels load through numba)")
def test_samplers_load_natively_without_numba_with_numpys_bits(tmp_path):
    # Cold: the worker compiles every kernel (log1p's callers too: no "object mode"
    # fallback), this process links them. Warm: a fresh process links them from the disk
    # cache at its first calls. Neither imports numba; every value is the NumPy backend's.
    import plax
    from plax import random
    env = {"PLAX_NUMBA_CACHE_DIR": str(tmp_path), "PLAX_NUMBA_COMPILE_AFTER": "1"}
    cold, warm = _run(env), _run(env)
    programs = [lambda k: random.normal(k, (5, 7)),
                lambda k: random.uniform(k, (33,), minval=-2.0, maxval=3.0),
                lambda k: random.truncated_normal(k, -1.5, 2.0, (40,)),
                lambda k: random.gamma(k, np.array([0.3, 1.0, 2.5, 7.0], np.float32))]
    want = [np.asarray(plax.jit(p, backend="numpy")(random.PRNGKey(3))) for p in programs]
    for run in (cold, warm):
        assert not run["numba"], run
        assert run["fallbacks"] == {}, run["fallbacks"]
        assert run["native"] >= 4 and run["native"] == run["loaded"], run
        for got, ref in zip(run["out"], want):
            got = np.asarray(got, np.float32)
            np.testing.assert_array_equal(got.view(np.uint32), ref.ravel().view(np.uint32))

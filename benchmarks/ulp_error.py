"""What the function benchmarks share: the median time of a call, and the largest error of a
result in ulps of its dtype against a float64 reference, for plax's fused kernel and JAX's
jitted function on the same inputs.

Used by ``benchmarks/transcendental.py`` and ``benchmarks/special_bench.py``.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np


def median_time(fn: Callable, args: tuple, repeat: int) -> float:
    """Seconds per call of ``fn(*args)``: the median of ``repeat`` runs, each as many calls
    as fill ~50 ms (after one warm-up call; results are waited for with
    ``block_until_ready`` where they have it)."""
    out = fn(*args)
    getattr(out, "block_until_ready", lambda: None)()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.05:
        fn(*args)
        calls += 1
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        getattr(out, "block_until_ready", lambda: None)()
        runs.append((time.perf_counter() - t) / calls)
    return statistics.median(runs)


def max_ulps(got: np.ndarray, ref: np.ndarray, dtype=np.float32) -> float:
    """Largest ``|got - ref|`` in ulps of ``dtype`` at the float64 reference ``ref``, over the
    elements where both are finite (in ``dtype``); below the smallest normal number the unit
    is that number (an absolute error there).

    Example:
      >>> max_ulps(np.float32([1.0]), np.array([1.0 + 2 ** -23]))
      1.0
    """
    dtype = np.dtype(dtype)
    got = np.asarray(got).astype(np.float64)
    ref = np.asarray(ref, np.float64)
    with np.errstate(all="ignore"):
        r = np.abs(ref).astype(dtype)
    ok = np.isfinite(r) & np.isfinite(got)
    if not ok.any():
        return 0.0
    spacing = np.maximum(np.spacing(r[ok]).astype(np.float64), float(np.finfo(dtype).tiny))
    return float((np.abs(got[ok] - ref[ok]) / spacing).max())


def fused_errors(plax_fn: Callable, jax_fn: Callable | None, args: tuple, ref: np.ndarray,
                 dtype=np.float32) -> tuple[float, float | None]:
    """``(plax error, JAX error)`` in ulps of ``dtype`` of ``plax_fn(*args)`` inside a fused
    kernel on the Numba backend (``plax_fn(...) * 1``: a lone equation may run another path)
    and of ``jax.jit(jax_fn)(*args)``, against ``ref``; JAX's is None when ``jax_fn`` is."""
    import plax
    one = np.dtype(dtype).type(1)
    fused = plax.jit(lambda *v: plax_fn(*v) * one, backend="numba")
    err_plax = max_ulps(np.asarray(fused(*args)), ref, dtype)
    if jax_fn is None:
        return err_plax, None
    import jax
    return err_plax, max_ulps(np.asarray(jax.jit(jax_fn)(*args)), ref, dtype)

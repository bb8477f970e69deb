"""The Numba backend's first call: tiered, it runs on the reference kernels without importing
numba (issue 11: a first call costs what it costs on the NumPy backend), and the reference
path of a cluster frees its intermediates after their last use."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import plax
from plax import numpy as jnp

_FIRST_CALLS = textwrap.dedent("""
    import sys
    import numpy as np
    import plax
    from plax import random
    from plax import numpy as jnp

    def mlp(w, b, x):  # per-cluster program: dot_general, tanh clusters, a reduction
        h = jnp.tanh(x @ w + b)
        return jnp.mean((h - 1.0) ** 2), plax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)

    def small(x):  # small enough for a whole-program kernel
        return jnp.sin(x * 2.0 + 1.0) * jnp.cos(x) - x / 3.0

    def normal(k):  # threefry2x32 and the sampler's split cluster (log1p)
        return random.normal(k, (1000,))

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    b = np.zeros(32, np.float32)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    cases = [(mlp, (w, b, x)), (small, (x[0],)), (normal, (random.PRNGKey(1),))]
    for f, args in cases:
        got = plax.tree_util.tree_leaves(plax.jit(f, backend="numba")(*args))
        want = plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))
        for g, e in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6, atol=1e-6)
    print("numba imported:", "numba" in sys.modules)
""")


def test_first_calls_do_not_import_numba(tmp_path):
    # (not a loop: its body runs many times in one call, so it is hot, and compiles in the
    # background, during the first call)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_COMPILE_AFTER", "PLAX_BACKEND")}
    env["PLAX_NUMBA_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode and "Unknown backend" in proc.stderr:
        pytest.skip("no numba entry point in this install")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "numba imported: False" in proc.stdout, proc.stdout


def _chain(x):
    # a long elementwise chain with a log1p in the middle (the emitter splits the cluster
    # around it): one fusion cluster of ~30 equations
    y = x
    for i in range(12):
        y = y * 1.0001 + 0.5
    y = jnp.log1p(y * y)
    for i in range(12):
        y = y * 0.999 - 0.25
    return y


@pytest.mark.parametrize("sync", [False, True], ids=["tiered", "sync"])
def test_cluster_frees_intermediates(monkeypatch, sync):
    if not sync:  # the reference path only: never hot
        monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
        monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1000")
    n = 1 << 18                     # 1 MiB of float32 per value
    x = np.linspace(-1, 1, n, dtype=np.float32)
    f = plax.jit(_chain, backend="numba")
    want = np.asarray(plax.jit(_chain, backend="numpy")(x))
    f(x)  # trace and compile outside the measurement
    tracemalloc.start()
    try:
        got = np.asarray(f(x))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # the output, a few operands in flight; holding every intermediate would be ~25 MiB
    assert peak < 8 * x.nbytes, peak / x.nbytes

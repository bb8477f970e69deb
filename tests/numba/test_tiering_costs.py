"""What a compilation costs in tiering's compile worker (issue 26, item 2): the mechanisms
that keep it short are used. No timing is asserted; ``benchmarks/numba_tiering.py --profile``
measures where the time goes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
from plax import numpy as jnp

_BODY = textwrap.dedent("""
    @njit(**_OPTIONS)
    def kernel(a, o):
        for i in range(a.size):
            o[i] = exp_f32(a[i]) * np.float32(0.5)
        return 0
""")


def test_a_kernel_module_imports_only_the_helpers_it_names():
    from plax_numba import cache
    text = cache.module_source(_BODY, ["exp", "mul"])
    assert "from plax_numba.scalar import exp_f32\n" in text
    # plax_numba.special imports all of plax: a worker compiling this kernel never does
    assert "plax_numba.special" not in text and "tanh_f32" not in text
    bessel = cache.module_source(_BODY.replace("exp_f32", "bessel_i0e_f32"), ["bessel_i0e"])
    assert "from plax_numba.special import bessel_i0e_f32\n" in bessel
    assert "exp_f32" not in bessel


def test_a_generated_kernel_names_its_helpers_in_its_imports():
    x = np.linspace(-2, 2, 257, dtype=np.float32)
    f = plax.jit(lambda x: jnp.where(x > 0, x, 1.5 * jnp.exp(x) - 1.5) * 1.05,
                 backend="numba")
    text = f.lower(x).compile().as_text()
    assert "from plax_numba.scalar import exp_f32" in text
    assert "plax_numba.special" not in text and "plax_numba.arrays" not in text


_COMPILE_IN_A_FRESH_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    from plax_numba import cache
    text, arg_types, directory = {args!r}
    cache.compile_for_cache(text, [(k, np.dtype(d), r) for k, d, r in arg_types], directory)
    kernel = cache.load_kernel(text)
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out)
    print(repr(out.tolist()))
    print(sorted(m for m in sys.modules if m == "plax" or m.startswith("plax.")))
""")


def test_the_worker_compiles_a_kernel_without_importing_plax(tmp_path):
    # What a compile worker runs for a job (cache.compile_for_cache), in a fresh interpreter:
    # the kernel compiles, computes, and plax itself is never imported there.
    from plax_numba import cache
    text = cache.module_source(_BODY, ["exp", "mul"])
    arg_types = [("array", "float32", 1), ("array", "float32", 1)]
    code = _COMPILE_IN_A_FRESH_PROCESS.format(args=(text, arg_types, str(tmp_path)))
    env = dict(os.environ, PLAX_NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("PLAX_NUMBA_SYNC", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values, modules = proc.stdout.strip().splitlines()[-2:]
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    np.testing.assert_allclose(eval(values), np.exp(x.astype(np.float64)) * 0.5, rtol=1e-6)
    assert modules == "[]"


def test_planning_hands_the_gil_over_often_while_a_compile_is_in_flight(monkeypatch):
    """A cluster's planning (``codegen.plan_cluster``, then the first tier's ``plan``:
    milliseconds of Python, on the program's thread) and a native loop's first-tier plan run
    with the interpreter's switch interval lowered while a compile window is open, and only
    then, so a thread waiting for the GIL gets it within ``LOAD_SWITCH_INTERVAL`` (counted,
    not timed)."""
    from plax.lowering.fusion import sub_cluster
    from plax_numba import cache, codegen, emitter, llvm_tier, llvm_tier_loops, tiered
    seen = []

    def recording(name, original=None):
        def record(*args, **kw):
            seen.append((name, sys.getswitchinterval()))
            return original(*args, **kw) if original else None
        return record

    monkeypatch.setattr(codegen, "plan_cluster", recording("cluster", codegen.plan_cluster))
    monkeypatch.setattr(llvm_tier, "_plan", recording("first tier"))   # (None: declined)
    monkeypatch.setattr(llvm_tier_loops, "_plan", recording("loop"))
    # the step's kernel not compiled yet, nor on disk, nor a worker started: the path on
    # which the first tier is planned, with nothing started by this test
    monkeypatch.setattr(cache, "compiled_kernel", lambda *a: None)
    monkeypatch.setattr(cache, "on_disk", lambda *a: False)
    monkeypatch.setattr(emitter, "_loaded_now", lambda *a: False)
    monkeypatch.setattr(llvm_tier, "enabled", lambda: True)
    monkeypatch.setattr(llvm_tier, "only", lambda: False)
    monkeypatch.setattr(tiered, "counting", lambda interp, *a, **kw: interp)
    backend = plax.plugins.registry().backends["numba"]
    closed = plax.make_jaxpr(lambda x: jnp.exp(x) * 2.5 + 1.5)(np.ones(8, np.float32))
    jaxpr = closed.jaxpr
    cluster = sub_cluster(jaxpr.eqns, (8,), {id(v) for v in jaxpr.outvars})
    default = sys.getswitchinterval()
    assert default > tiered.LOAD_SWITCH_INTERVAL
    for window_open in (False, True):
        monkeypatch.setattr(tiered, "compile_window_open", lambda: window_open)
        emit = emitter.NumbaEmitter(backend, plax.devices("cpu")[0])
        emit.sync, emit.compile_kernels = False, True
        assert emit._emit_kernel(cluster) is not None
        llvm_tier_loops.plan(None, None)
    # (the interpreter keeps the interval in microseconds)
    names = [name for name, _ in seen]
    assert names == ["cluster", "first tier", "loop"] * 2
    expected = [default] * 3 + [tiered.LOAD_SWITCH_INTERVAL] * 3
    assert [interval for _, interval in seen] == pytest.approx(expected, abs=1e-6)
    assert sys.getswitchinterval() == default

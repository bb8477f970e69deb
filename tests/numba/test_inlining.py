"""Scalar helpers inlined by LLVM rather than by numba (:mod:`plax_numba.inlining`): the
helper's compiled function is marked ``alwaysinline`` whether numba compiled it or loaded it
from its disk cache, the kernels calling it hold no call to it, and the values are the
helper's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit, types

from plax_numba.inlining import inlined, is_always_inline


def _marked(cres) -> bool:
    module = cres.library._get_module_for_linking()
    return is_always_inline(module.get_function(cres.fndesc.llvm_func_name))


def test_a_kernel_holds_no_call_to_an_inlined_helper():
    @inlined(nogil=True, error_model="numpy")
    def helper(x):
        # (long enough that LLVM's inliner would weigh it against its threshold)
        r = x
        for _ in range(12):
            r = np.float32(r * np.float32(0.5) + np.float32(1.0) / (r * r + np.float32(1.0)))
        return r

    @njit(nogil=True, error_model="numpy")
    def kernel(a, o):
        for i in range(a.size):
            o[i] = helper(a[i]) + helper(a[i] * np.float32(2.0))

    a = np.linspace(-3, 3, 1001, dtype=np.float32)
    o = np.empty_like(a)
    kernel(a, o)
    want = np.array([helper.py_func(v) + helper.py_func(v * np.float32(2.0)) for v in a],
                    np.float32)
    np.testing.assert_array_equal(o, want)  # (the same float32 operations, in order)
    cres = helper.overloads[(types.float32,)]
    assert _marked(cres)
    name = cres.fndesc.llvm_func_name
    calls = [line for line in kernel.inspect_llvm(kernel.signatures[0]).splitlines()
             if "call" in line and f"@{name}(" in line]
    assert calls == [], calls


def test_numbas_own_inlining_is_refused():
    with pytest.raises(ValueError, match="inline"):
        inlined(inline="always")


def test_a_helper_loaded_from_numbas_disk_cache_is_marked(tmp_path):
    # plax's own helper (cache=True): the first process compiles it and saves it, the
    # second loads it from the cache; both see it marked
    code = textwrap.dedent("""
        import json
        from numba import types
        from plax_numba.inlining import is_always_inline
        from plax_numba.scalar import exp_f32
        exp_f32.compile((types.float32,))
        cres = exp_f32.overloads[(types.float32,)]
        module = cres.library._get_module_for_linking()
        function = module.get_function(cres.fndesc.llvm_func_name)
        print(json.dumps({"hits": sum(exp_f32.stats.cache_hits.values()),
                          "marked": is_always_inline(function)}))
        """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0]["marked"] and runs[1]["marked"], runs
    assert runs[1]["hits"] == 1, runs

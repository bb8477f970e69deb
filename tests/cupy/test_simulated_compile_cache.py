"""A program's kernels are compiled concurrently before its first launch, once per process and
source, and a second process with a warm kernel cache compiles nothing (issue 24, "MLP step
first call": ``plax_cupy.kernel_modules``).

On the simulated GPU plax's NVRTC compiles reach the simulated NVRTC (``fake_nvrtc.COMPILES``),
whose binaries plax keeps in its kernel cache (:mod:`plax_cupy.kernel_cache`), and a loaded
module is a host build of the binary's source (:func:`plax_cupy.nvrtc.compile_host`, cached on
disk by the source's hash; ``nvrtc.HOST_BUILDS`` counts the compiler's runs): two fresh
processes sharing the cache directories run the same jitted program, the first compiles its
kernels and the second none, with equal results. Which is also the check that the generated
source is the same from one process to the next (no ids or addresses in it), which the kernel
cache relies on.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from test_simulated_streams import REPO, SIMULATED, child_env, on_simulated_gpu, \
    run_file_on_simulated_gpu

_PROGRAM = r"""
import json, sys
import fake_cupy, fake_nvrtc
fake_cupy.install()
import numpy as np
import plax, plax.numpy as jnp
from plax_cupy import kernel_modules, nvrtc

def step(w, x):
    h = jnp.tanh(x @ w + 1.0)
    return jnp.sum(h * h, axis=1), jnp.exp(-h).max()

r = np.random.default_rng(0)
gpu = plax.devices("gpu")[0]
w, x = plax.device_put((r.normal(size=(5, 3)).astype(np.float32),
                        r.normal(size=(4, 5)).astype(np.float32)), gpu)
out = [np.asarray(o).tolist() for o in plax.jit(step)(w, x)]
stats = kernel_modules.stats()
print(json.dumps({"out": out, "compiles": nvrtc.HOST_BUILDS[0], "built": stats["built"],
                  "nvrtc": len(fake_nvrtc.COMPILES), "compiled": stats["compiled"],
                  "loaded": stats["loaded"]}))
"""


def _run(cache_dir: str) -> dict:
    # compile_host's cache: $TMPDIR/plax_cupy_host; plax's kernel cache: PLAX_CUPY_CACHE_DIR
    env = dict(child_env(), TMPDIR=cache_dir, PLAX_CUPY_CACHE_DIR=f"{cache_dir}/kernels")
    done = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_a_second_process_with_a_warm_cache_compiles_nothing(tmp_path):
    cold = _run(str(tmp_path))
    warm = _run(str(tmp_path))
    assert cold["compiles"] >= 2 and cold["built"] >= 2, cold   # (a product, fused clusters)
    assert cold["nvrtc"] == cold["compiled"] == cold["built"] and cold["loaded"] == 0, cold
    assert warm["compiles"] == 0 and warm["nvrtc"] == warm["compiled"] == 0, warm
    assert warm["built"] == warm["loaded"] == cold["built"], (cold, warm)   # from the cache
    assert warm["out"] == cold["out"]


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=2)


@on_simulated_gpu
def test_a_programs_kernels_are_built_concurrently_before_its_first_launch(monkeypatch):
    import plax
    import plax.numpy as jnp
    import fake_cupy
    from plax_cupy import kernel_modules
    threads: list = []
    build = kernel_modules._build

    def recording(key, entries):  # the thread, and how many kernels had run by then
        threads.append((threading.current_thread().name, fake_cupy.COUNTS["kernel_launches"]))
        return build(key, entries)
    monkeypatch.setattr(kernel_modules, "_build", recording)
    monkeypatch.setenv("PLAX_CUPY_COMPILE_THREADS", "3")
    h = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = plax.device_put(h, plax.devices("gpu")[0])
    launches = fake_cupy.COUNTS["kernel_launches"]
    # clusters of sources no other test builds (the constants are baked in)
    out = plax.jit(lambda x: (jnp.sin(x * 3.25) @ x.T, jnp.cos(x * 4.75).sum(axis=0)))(x)
    assert fake_cupy.COUNTS["kernel_launches"] > launches          # it ran kernels ...
    assert len(threads) >= 2, threads
    assert all(name.startswith("plax-cupy-compile") for name, _ in threads), threads
    assert all(ran == launches for _, ran in threads), threads   # ... all built before the first
    np.testing.assert_allclose(np.asarray(out[0]), np.sin(h * 3.25) @ h.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out[1]), np.cos(h * 4.75).sum(axis=0), rtol=1e-5)
    built = len(threads)
    # a second program with the same kernels shares the modules: nothing built
    plax.jit(lambda x: (jnp.sin(x * 3.25) @ x.T, jnp.cos(x * 4.75).sum(axis=0)))(x)
    assert len(threads) == built


@on_simulated_gpu
def test_compile_threads_setting(monkeypatch):
    from plax_cupy import kernel_modules
    monkeypatch.setenv("PLAX_CUPY_COMPILE_THREADS", "2")
    assert kernel_modules.compile_threads() == 2
    monkeypatch.setenv("PLAX_CUPY_COMPILE_THREADS", "zero")
    with pytest.raises(ValueError, match="'zero' for the environment variable PLAX_CUPY_COMPILE_THREADS: expected an integer"):
        kernel_modules.compile_threads()

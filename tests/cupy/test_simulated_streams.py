"""The simulated GPU is honest, and the bugs it is honest about stay fixed.

* what CuPy refuses, the simulation refuses: implicit conversion to NumPy, NumPy functions and
  ufuncs CuPy does not implement, NumPy arrays handed to CuPy functions;
* streams: a read of an array whose producing work on another stream is still pending raises
  ``StreamOrderError``; the memory pool reuses freed blocks per stream and a hazardous reuse
  raises ``UseAfterFreeError``; fresh memory is poisoned;
* regression of issue 24's silent ``scan(..., reverse=True)`` bug: eager control flow ran its
  own CuPy work (stacking ``ys``) on the legacy default stream while the bodies' kernels were
  queued on the backend's non-blocking stream, so on a GPU the first rows computed read back
  stale memory (zeros). On the simulation that read now raises, so the test fails before the
  fix (``CupyBackend._control_flow`` enters the device's stream);
* the host-traffic counters (``plax_cupy.counters`` / ``plax_cupy.count``).

The tests need the simulated CuPy in place of CuPy, so :func:`test_on_the_simulated_gpu` runs
this file again in a child process with ``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def _simulated() -> bool:
    mod = sys.modules.get("cupy")
    return mod is not None and getattr(mod, "__version__", "").endswith("simulated")


SIMULATED = _simulated()
on_simulated_gpu = pytest.mark.skipif(not SIMULATED, reason="runs on the simulated GPU "
                                      "(test_on_the_simulated_gpu starts it)")


def child_env() -> dict:
    """The environment of a child process that runs pytest on the simulated GPU."""
    path = os.pathsep.join([HERE, os.path.join(REPO, "backends"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_file_on_simulated_gpu(*paths: str, skipped: int = 1) -> None:
    """Runs the test files ``paths`` in one child pytest on the simulated GPU; fails with its
    output unless every test passed and exactly ``skipped`` skipped.

    Args:
      paths: test files.
      skipped: how many tests the child skips: 1 for a file holding its own launcher (which
        skips there), 0 where nothing may skip (so no test in the files may need JAX, which CI
        lacks).
    """
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_cupy_plugin", "-q",
                           "-p", "no:cacheprovider", "-p", "no:randomly", *paths],
                          capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=600)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout, tail
    if skipped:
        assert f" {skipped} skipped" in done.stdout, tail
    else:
        assert "skipped" not in done.stdout, tail


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


# ---------------------------------------------------------------- what CuPy refuses

@on_simulated_gpu
def test_device_arrays_refuse_numpy_where_cupy_does():
    import cupy
    import scipy.special
    x = cupy.asarray(np.arange(6.0).reshape(2, 3))
    assert not isinstance(x, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x)
    with pytest.raises(TypeError, match="no implementation found"):
        np.unstack(x)                       # NumPy 2.1's unstack: not in CuPy
    with pytest.raises(TypeError):
        scipy.special.erf(x)                # scipy ufuncs do not dispatch to CuPy
    with pytest.raises(TypeError, match="Unsupported type"):
        x + np.ones(3)                      # a host array in a device operation
    np.testing.assert_allclose(np.exp(x).get(), np.exp(np.arange(6.0).reshape(2, 3)))
    np.testing.assert_allclose(cupy.linalg.inv(cupy.eye(2) * 2).get(), np.eye(2) / 2)
    s = cupy.sum(x)
    assert isinstance(s, cupy.ndarray) and s.shape == () and float(s) == 15.0


@on_simulated_gpu
def test_builtin_named_functions_do_not_shadow_the_simulations_builtins():
    import cupy
    x = cupy.asarray(np.arange(5.0))
    assert float(cupy.max(x)) == 4.0 and float(cupy.min(x)) == 0.0
    y = cupy.ones(1000)        # the pool's malloc calls Python's max(): must still be the builtin
    assert float(cupy.sum(y)) == 1000.0


@on_simulated_gpu
def test_host_reads_are_counted():
    import cupy
    import fake_cupy
    x = cupy.arange(4)
    before = dict(fake_cupy.COUNTS)
    x.get(), x[0].item(), float(x[1]), x.tolist()
    assert fake_cupy.COUNTS["device_to_host"] - before["device_to_host"] == 4


# ---------------------------------------------------------------- streams and the pool

@on_simulated_gpu
def test_unsynchronised_cross_stream_read_raises():
    import cupy
    import fake_cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y = cupy.arange(8.0) * 2
    with pytest.raises(fake_cupy.StreamOrderError, match="not synchronised"):
        y + 1                               # on the legacy default stream
    with s:
        np.testing.assert_array_equal((y + 1).get(), np.arange(8.0) * 2 + 1)  # same stream: ordered
    with s:
        z = y * 3
    cupy.cuda.get_current_stream().wait_event(s.record())
    np.testing.assert_array_equal((z + 0).get(), np.arange(8.0) * 6)      # ordered by an event
    with s:
        w = y - 1
    s.synchronize()
    np.testing.assert_array_equal((w * 1).get(), np.arange(8.0) * 2 - 1)   # after a sync


@on_simulated_gpu
def test_pool_reuse_after_free_on_another_stream_raises():
    import cupy
    import fake_cupy
    s = cupy.cuda.Stream(non_blocking=True)
    a = cupy.arange(1000.0)                 # allocated on the default stream
    a.get()                                 # ... and complete
    with s:
        b = a * 2                           # pending work on s reads a
    del a                                   # freed to the default stream's arena
    with pytest.raises(fake_cupy.UseAfterFreeError, match="reused"):
        cupy.empty(1000, np.float64)        # reuses it while s may still read it
    s.synchronize()
    np.testing.assert_array_equal(b.get(), np.arange(1000.0) * 2)


@on_simulated_gpu
def test_fresh_memory_is_poisoned_and_freed_memory_reused():
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()    # no cached block: fresh memory
    e = cupy.empty(4, np.float32)
    assert np.isnan(e.get()).all()          # never silently zero
    a = cupy.full(256, 7.0, np.float32)
    ptr = a.data.ptr
    del a
    b = cupy.empty(256, np.float32)         # same stream, same size: the same block, stale
    assert b.data.ptr == ptr and (b.get() == 7.0).all()


# ---------------------------------------------------------------- issue 24: scan(reverse=True)

@on_simulated_gpu
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_eager_scan_runs_on_the_device_stream(reverse, dtype):
    import plax
    from plax import lax
    gpu = plax.devices("gpu")[0]
    xs_host = (np.arange(12).reshape(6, 2) + 1).astype(dtype)

    def body(c, x):
        c = c * 2 + x
        return c, c * 3 - x

    xs = plax.device_put(xs_host, gpu)
    init = plax.device_put(np.ones(2, dtype), gpu)
    carry, ys = lax.scan(body, init, xs, reverse=reverse)      # eager: the backend's runner
    c, want = np.ones(2, dtype), np.zeros_like(xs_host)
    for i in (range(5, -1, -1) if reverse else range(6)):
        c = (c * 2 + xs_host[i]).astype(dtype)
        want[i] = c * 3 - xs_host[i]
    np.testing.assert_array_equal(np.asarray(ys), want)
    np.testing.assert_array_equal(np.asarray(carry), c)


# ---------------------------------------------------------------- counters

@on_simulated_gpu
def test_counters_count_copies_launches_and_fallbacks():
    import plax
    import plax.numpy as jnp
    import plax_cupy
    gpu = plax.devices("gpu")[0]
    x_host = np.linspace(-2, 2, 1000, dtype=np.float32)
    selu = plax.jit(lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67))
    with plax_cupy.count() as put:
        x = plax.device_put(x_host, gpu)
    assert (put.host_to_device, put.device_to_host) == (1, 0)
    selu(x).block_until_ready()                                  # compile outside the count
    with plax_cupy.count() as call:
        y = selu(x).block_until_ready()
    assert call.launches >= 1 and call.host_to_device == call.device_to_host == 0
    assert call.host_fallbacks == 0 and call.fallbacks == {}
    with plax_cupy.count() as read:
        np.asarray(y)
    assert read.device_to_host == 1 and read.launches == 0
    total = plax_cupy.counters()
    assert isinstance(total, plax_cupy.Counters) and total.device_to_host >= 1
    with pytest.raises(RuntimeError, match="with plax_cupy.count"):
        plax_cupy.count().launches


@on_simulated_gpu
def test_plugin_kernel_runs_on_the_device_stream():
    import cupy
    from plax import plugins
    from plax.core.primitive import Primitive
    be = plugins.registry().get_backend("cupy")
    twice = Primitive("simulated_twice")
    twice.def_abstract_eval(lambda x: x)
    streams = []

    def kernel(x):
        streams.append(cupy.cuda.get_current_stream())
        return x * 2

    be.register_kernel(twice, kernel)
    gpu = be.devices()[0]
    out = be.execute(twice, be.put(np.arange(3, dtype=np.float32), gpu))
    assert streams == [be.stream(gpu)]
    np.testing.assert_array_equal(be.to_host(out), [0.0, 2.0, 4.0])

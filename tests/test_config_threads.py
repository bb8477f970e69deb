"""Config context managers are per-thread, as JAX's: a thread's ``with jax.debug_nans(True):``
(``numpy_rank_promotion``, ``numpy_dtype_promotion``, ``enable_x64``, ``default_device``, ...)
does not leak into another thread, and a thread sees the global value (``config.update``)
unless it has a context of its own -- also a thread started inside another's context.

Threads meet at barriers (no sleeps): each check runs while the other thread's context is
certainly active.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dtypes
from subprocess_util import last_json, run_python

try:
    import jax
except ImportError:  # the JAX halves of the tests are skipped
    jax = None


def _in_two_threads(inside, outside):
    """Runs ``inside(barrier)`` and ``outside(barrier)`` on two threads; each calls
    ``barrier.wait()`` twice, around the part that must overlap the other's. Returns their
    results (re-raising the first exception)."""
    barrier = threading.Barrier(2, timeout=60)
    results: list = [None, None]
    errors: list = [None, None]

    def run(k, fn):
        try:
            results[k] = fn(barrier)
        except BaseException as e:  # noqa: BLE001 -- re-raised on the main thread
            errors[k] = e
            barrier.abort()

    threads = [threading.Thread(target=run, args=(k, fn)) for k, fn in
               enumerate((inside, outside))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None and not isinstance(e, threading.BrokenBarrierError):
            raise e
    return results


def test_debug_nans_in_one_thread_does_not_check_another():
    def inside(barrier):
        with plax.debug_nans(True):
            barrier.wait()
            with pytest.raises(FloatingPointError, match=r"invalid value \(nan\)"):
                jnp.log(-jnp.ones(2))
            with pytest.raises(FloatingPointError):
                plax.jit(lambda x: jnp.log(x) * 2)(-jnp.ones(2))
            seen = plax.config.jax_debug_nans
            barrier.wait()
        return seen

    def outside(barrier):
        barrier.wait()
        out = np.asarray(jnp.log(-jnp.ones(2)))  # no check here
        jitted = np.asarray(plax.jit(lambda x: jnp.log(x) * 3)(-jnp.ones(2)))
        seen = (plax.config.jax_debug_nans, plax.config.values["jax_debug_nans"])
        barrier.wait()
        return np.isnan(out).all() and np.isnan(jitted).all(), seen

    seen_inside, (all_nan, seen_outside) = _in_two_threads(inside, outside)
    assert seen_inside is True
    assert all_nan and seen_outside == (False, False)
    assert not plax.config.has_thread_contexts()
    assert np.isnan(np.asarray(jnp.log(-jnp.ones(2)))).all()


def test_rank_and_dtype_promotion_contexts_are_per_thread():
    def inside(barrier):
        with plax.numpy_rank_promotion("raise"), plax.numpy_dtype_promotion("strict"):
            barrier.wait()
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
                jnp.ones(3) + jnp.ones((2, 3))
            with pytest.raises(dtypes.TypePromotionError):
                jnp.ones(3, jnp.float16) + jnp.ones(3)
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
                plax.jit(lambda x, y: x + y)(jnp.ones(3), jnp.ones((2, 3)))
            barrier.wait()

    def outside(barrier):
        barrier.wait()
        a = jnp.ones(3) + jnp.ones((2, 3))
        b = jnp.ones(3, jnp.float16) + jnp.ones(3)
        c = plax.jit(lambda x, y: x + y)(jnp.ones(3), jnp.ones((2, 3)))
        barrier.wait()
        return a.shape, b.dtype, c.shape

    _, (a, b, c) = _in_two_threads(inside, outside)
    assert a == c == (2, 3) and b == np.float32


def test_enable_x64_context_is_per_thread_and_jit_traces_per_thread():
    f = plax.jit(lambda x: x * 2)

    def inside(barrier):
        with plax.enable_x64(True):
            barrier.wait()
            out = (jnp.ones(1).dtype, f(np.ones(2)).dtype, jnp.arange(3).dtype)
            barrier.wait()
        return out

    def outside(barrier):
        barrier.wait()
        out = (jnp.ones(1).dtype, f(np.ones(2)).dtype, jnp.arange(3).dtype)
        barrier.wait()
        return out

    wide, narrow = _in_two_threads(inside, outside)
    assert wide == (np.float64, np.float64, np.int64)
    assert narrow == (np.float32, np.float32, np.int32)


def test_threads_see_the_global_value_not_a_parent_thread_s_context():
    seen = []

    def child():
        seen.append(plax.config.jax_numpy_rank_promotion)

    with plax.numpy_rank_promotion("raise"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
        plax.config.update("jax_numpy_rank_promotion", "warn")  # the global value
        assert plax.config.jax_numpy_rank_promotion == "raise"  # the context still wins here
        t = threading.Thread(target=child)
        t.start()
        t.join()
    try:
        assert seen == ["allow", "warn"]
        assert plax.config.jax_numpy_rank_promotion == "warn"  # the global value, after
    finally:
        plax.config.update("jax_numpy_rank_promotion", "allow")


def test_nested_contexts_restore_in_order():
    with plax.numpy_rank_promotion("warn"):
        with plax.numpy_rank_promotion("raise"):
            assert plax.config.jax_numpy_rank_promotion == "raise"
        assert plax.config.jax_numpy_rank_promotion == "warn"
    assert plax.config.jax_numpy_rank_promotion == "allow"
    assert not plax.config.has_thread_contexts()


_DEFAULT_DEVICE = """
import json, threading, plax, plax.numpy as jnp
cpu = plax.devices("cpu")
barrier = threading.Barrier(2, timeout=60)
seen = {}

def inside():
    with plax.default_device(cpu[1]):
        barrier.wait()
        seen["inside"] = repr(jnp.ones(2).device)
        barrier.wait()

def outside():
    barrier.wait()
    seen["outside"] = repr(jnp.ones(2).device)
    barrier.wait()

threads = [threading.Thread(target=inside), threading.Thread(target=outside)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps([seen.get("inside"), seen.get("outside")]))
"""


def test_default_device_context_is_per_thread():
    # two CPU devices: a child interpreter, as the device count is read once
    out = last_json(run_python(_DEFAULT_DEVICE, env={"PLAX_PLATFORMS": "cpu",
                                                     "PLAX_NUM_CPU_DEVICES": "2"}))
    assert out == ["CpuDevice(id=1)", "CpuDevice(id=0)"]


def test_default_device_option_set_in_a_thread_s_context_stays_in_that_thread():
    cpu = plax.devices("cpu")[0]

    def inside(barrier):
        with plax.config.override("jax_default_device", "cpu"):
            barrier.wait()
            seen = plax.config.jax_default_device
            dev = jnp.ones(2).device
            barrier.wait()
        return seen, dev

    def outside(barrier):
        barrier.wait()
        seen = plax.config.jax_default_device
        dev = jnp.ones(2).device
        barrier.wait()
        return seen, dev

    (seen_in, dev_in), (seen_out, dev_out) = _in_two_threads(inside, outside)
    assert (seen_in, seen_out) == ("cpu", None)
    assert dev_in == cpu and dev_out == plax.devices()[0]


@pytest.mark.skipif(jax is None, reason="JAX is not installed: no side-by-side check")
def test_same_thread_semantics_as_jax():
    def observe(jx):
        seen = []

        def child():
            seen.append((jx.config.jax_numpy_rank_promotion, jx.config.jax_debug_nans))

        with jx.numpy_rank_promotion("raise"), jx.debug_nans(True):
            seen.append((jx.config.jax_numpy_rank_promotion, jx.config.jax_debug_nans))
            t = threading.Thread(target=child)
            t.start()
            t.join()
            jx.config.update("jax_numpy_rank_promotion", "warn")
            seen.append((jx.config.jax_numpy_rank_promotion,
                         jx.config.values["jax_numpy_rank_promotion"]))
            t = threading.Thread(target=child)
            t.start()
            t.join()
        seen.append(jx.config.jax_numpy_rank_promotion)
        jx.config.update("jax_numpy_rank_promotion", "allow")
        return seen

    assert observe(plax) == observe(jax) == [("raise", True), ("allow", False),
                                             ("raise", "raise"), ("warn", False), "warn"]

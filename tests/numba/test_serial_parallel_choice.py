"""A parallel kernel and its serial form are timed on the program's own calls and the faster
is kept (``plax_numba.tiered.faster_of``, issue 26): the choice comes from measurements,
injected here through the clock, not from the host's core count or load. The serial form
takes part only when it is at hand (compiled in this process, or on disk): nothing is
compiled for the timing alone."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp

from numba_vs_numpy import assert_bits_equal


def _clock(durations):
    """A clock whose k-th timed call lasts ``durations[k % len(durations)]`` seconds
    (``faster_of`` reads it twice per call: before and after)."""
    state = {"t": 0.0, "reads": 0}

    def clock():
        call, after = divmod(state["reads"], 2)
        state["reads"] += 1
        if after:
            state["t"] += durations[call % len(durations)]
        return state["t"]
    return clock


@pytest.mark.parametrize("durations,expected", [((1.0, 9.0), "serial"),
                                                ((9.0, 1.0), "parallel")])
def test_faster_of_keeps_the_form_with_the_least_median_time(durations, expected):
    from plax_numba import tiered
    calls, kept = [], []
    forms = {"serial": lambda x: calls.append("serial") or x + 1,
             "parallel": lambda x: calls.append("parallel") or x + 1}
    run = tiered.faster_of(forms, lambda name, fn: kept.append(name), trials=3,
                           clock=_clock(durations))
    for i in range(6):
        assert run(i) == i + 1
    assert calls == ["serial", "parallel"] * 3 and kept == [expected]
    assert run(10) == 11 and calls[-1] == expected  # after the choice: the kept form only
    assert sorted(run.__plax_times__["serial"]) == [durations[0]] * 3


def test_one_slow_call_does_not_decide():
    # the median: a single outlier of the serial form (a page fault, a preemption) is ignored
    from plax_numba import tiered
    kept = []
    forms = {"serial": lambda: None, "parallel": lambda: None}
    run = tiered.faster_of(forms, lambda name, fn: kept.append(name), trials=3,
                           clock=_clock((50.0, 3.0, 1.0, 3.0, 1.0, 3.0)))
    for _ in range(6):
        run()
    assert kept == ["serial"]


def test_no_trials_keeps_the_last_form_at_once(monkeypatch):
    from plax_numba import tiered
    monkeypatch.setenv("PLAX_NUMBA_CHOICE_TRIALS", "0")
    kept = []
    fn = tiered.faster_of({"serial": min, "parallel": max}, lambda n, f: kept.append(n))
    assert fn is max and kept == ["parallel"]


def test_a_malformed_trial_count_is_named_in_a_warning(monkeypatch):
    from plax_numba import tiered
    monkeypatch.setenv("PLAX_NUMBA_CHOICE_TRIALS", "three")
    with pytest.warns(UserWarning, match="'three' for the environment variable PLAX_NUMBA_CHOICE_TRIALS"):
        assert tiered.choice_trials() == tiered.CHOICE_TRIALS


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """An empty kernel cache and no kernel remembered by this process, so each kernel the
    test needs is really compiled (and counted)."""
    from plax_numba import cache
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    return tmp_path


def _chain(v):
    # an elementwise chain (a parallel kernel on 1M elements: above codegen.PARALLEL_MIN, no
    # reduction) of exactly rounded operations, so both loops give the NumPy backend's bits
    return jnp.sqrt(v * v + np.float32(1.6875)) * np.float32(0.5) - v


def test_the_choice_is_measured_and_sync_mode_compiles_no_serial_form(fresh_cache, monkeypatch):
    from plax_numba import cache, tiered
    compiled, offered = [], []
    real_compile, real_faster_of = cache.compile_for_cache, tiered.faster_of
    monkeypatch.setattr(cache, "compile_for_cache",
                        lambda text, arg_types, *a, **k: (compiled.append((text, arg_types)),
                                                          real_compile(text, arg_types, *a,
                                                                       **k))[1])
    durations = [None]

    def spy(forms, keep, trials=None, clock=None):
        offered.append(sorted(forms))
        return real_faster_of(forms, lambda name, fn: (offered.append(name), keep(name, fn)),
                              trials=2, clock=_clock(durations[0]))
    monkeypatch.setattr(tiered, "faster_of", spy)
    x = np.linspace(-30, 30, 1 << 20, dtype=np.float32)
    want = np.asarray(plax.jit(_chain, backend="numpy")(x))

    # PLAX_NUMBA_SYNC=1 (conftest): the parallel kernel alone is compiled, and runs untimed
    f = plax.jit(_chain, backend="numba")
    assert_bits_equal(np.asarray(f(x)), want)
    assert len(compiled) == 1 and cache.serial_variant(compiled[0][0]) is not None, compiled
    assert offered == []
    (text, arg_types), = compiled

    # once the serial form is at hand (here compiled by the test, as tiering would have
    # loaded it first), a program using the kernel times both and keeps the faster one
    cache.compile_kernel(cache.serial_variant(text), arg_types)
    for durations[0], expected in (((1.0, 9.0), "serial"), ((9.0, 1.0), "parallel")):
        del offered[:]
        g = plax.jit(lambda v: _chain(v), backend="numba")  # (a new program, same kernel)
        for _ in range(5):
            assert_bits_equal(np.asarray(g(x)), want)
        assert offered == [["parallel", "serial"], expected], offered
    assert len(compiled) == 2  # (the test's own serial compilation; nothing else)

    # a process finding both forms on disk (tiered, warm cache) loads them, compiles nothing
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    monkeypatch.setattr(cache, "_compiled", {})
    durations[0] = (1.0, 9.0)
    del offered[:]
    h = plax.jit(lambda v: _chain(v), backend="numba")
    for _ in range(5):
        assert_bits_equal(np.asarray(h(x)), want)
    assert offered == [["parallel", "serial"], "serial"], offered
    assert len(compiled) == 2


def test_the_tiered_path_times_the_serial_form_it_compiled_first(fresh_cache, monkeypatch):
    # tiering hands the worker the serial form, then the parallel kernel (two compilations,
    # as before the choice existed); once the parallel kernel is loaded, both are timed
    import time
    from plax_numba import cache, compile_worker, tiered
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_WORKERS", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1")
    submitted, offered = [], []
    real_submit, real_faster_of = compile_worker.submit, tiered.faster_of

    def submit(fn, *args):
        if fn is cache.compile_for_cache:
            submitted.append(args[0])
        return real_submit(fn, *args)
    monkeypatch.setattr(compile_worker, "submit", submit)

    def spy(forms, keep, trials=None, clock=None):
        offered.append(sorted(forms))
        return real_faster_of(forms, lambda name, fn: (offered.append(name), keep(name, fn)),
                              trials=2, clock=_clock((1.0, 9.0)))
    monkeypatch.setattr(tiered, "faster_of", spy)
    x = np.linspace(-20, 20, 1 << 20, dtype=np.float32)
    want = np.asarray(plax.jit(_chain, backend="numpy")(x))
    f = plax.jit(lambda v: _chain(v), backend="numba")
    deadline = time.monotonic() + 300  # (no timing asserted: a stuck compilation fails)
    while "serial" not in offered:
        assert time.monotonic() < deadline, "the parallel kernel never arrived"
        assert_bits_equal(np.asarray(f(x)), want)
        tiered.wait_idle(timeout=1.0)
    assert_bits_equal(np.asarray(f(x)), want)
    assert offered == [["parallel", "serial"], "serial"], offered
    assert len(submitted) == 2 and cache.serial_variant(submitted[1]) is not None
    assert submitted[0] == cache.serial_variant(submitted[1])

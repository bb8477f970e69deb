"""``plax.config.env_flag``: the one parse of the on/off environment variables of plax and its
backends (``PLAX_CUDA_GRAPHS``, ``PLAX_NUMBA_SYNC``, ``PLAX_PMAP_LIMIT_BLAS``, ...): the
accepted words, the default when unset or empty, and a ValueError naming the variable for
anything else (a typo no longer reads as "on"); and ``plax.config.env_number``, the one parse
of the numeric ones, with the sites that read it."""
from __future__ import annotations

import pytest

from plax.config import env_flag, env_number

NAME = "PLAX_TEST_ENV_FLAG"


@pytest.mark.parametrize("raw, expected", [
    ("1", True), ("true", True), (" YES ", True), ("On", True),
    ("0", False), ("false", False), ("No", False), (" off\n", False),
    ("t", True), ("Y", True), ("F", False), ("n", False)])   # (JAX's one-letter words too)
def test_words(monkeypatch, raw, expected):
    monkeypatch.setenv(NAME, raw)
    assert env_flag(NAME, not expected) is expected


@pytest.mark.parametrize("default", [True, False])
def test_unset_or_empty_is_the_default(monkeypatch, default):
    monkeypatch.delenv(NAME, raising=False)
    assert env_flag(NAME, default) is default
    for raw in ("", "  "):
        monkeypatch.setenv(NAME, raw)
        assert env_flag(NAME, default) is default


def test_other_values_raise_naming_the_variable(monkeypatch):
    monkeypatch.setenv(NAME, "of")
    with pytest.raises(ValueError, match=f"'of' for the environment variable {NAME}: "
                                         "expected one of 1, true"):
        env_flag(NAME, True)


def test_backend_switches_read_it(monkeypatch):
    """Switches that once took only ``0``/``1``, or read any other word as on, parse alike."""
    from plax import blas_threads
    tiered = pytest.importorskip("plax_numba.tiered")
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "yes")   # (was: only 1/true/yes/on; still on)
    assert tiered.sync_mode() is True
    monkeypatch.setenv("PLAX_NUMBA_GC_FREEZE", "of")   # (was: on)
    with pytest.raises(ValueError, match="PLAX_NUMBA_GC_FREEZE"):
        tiered.freezing_gc()
    monkeypatch.setenv("PLAX_PMAP_LIMIT_BLAS", "false")   # (was: only "0" turned it off)
    with blas_threads.limited(2):   # no limit: nothing to enter
        assert not blas_threads.held()


def test_the_words_are_jax_s(monkeypatch):
    """Every word JAX's boolean variables accept reads as JAX reads it (``JAX_ENABLE_X64=t``
    is on in JAX: ``import plax`` must not refuse it)."""
    bool_env = pytest.importorskip("jax._src.config").bool_env
    for word in ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"):
        for raw in (word, word.upper()):
            monkeypatch.setenv(NAME, raw)
            assert env_flag(NAME, False) is bool_env(NAME, False), raw


@pytest.mark.parametrize("raw, kind, expected", [
    ("3", int, 3), (" -2\n", int, -2), ("+7", int, 7), ("0.25", float, 0.25),
    (" 4 ", float, 4.0), ("1e-3", float, 1e-3)])
def test_numbers(monkeypatch, raw, kind, expected):
    monkeypatch.setenv(NAME, raw)
    value = env_number(NAME, 99, kind=kind)
    assert value == expected and type(value) is kind


def test_unset_or_empty_number_is_the_default(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    assert env_number(NAME, 5) == 5
    for raw in ("", "  "):
        monkeypatch.setenv(NAME, raw)
        assert env_number(NAME, 0.5, kind=float, minimum=1.0) == 0.5   # (not checked)


@pytest.mark.parametrize("raw, kind, minimum, expected", [
    ("two", int, None, "expected an integer"), ("1.5", int, None, "expected an integer"),
    ("nan", float, None, "expected a number"), ("0x10", float, None, "expected a number"),
    ("-1", int, 0, "expected an integer of at least 0"),
    ("0.05", float, 0.1, "expected a number of at least 0.1")])
def test_bad_numbers_raise_naming_the_variable_and_value(monkeypatch, raw, kind, minimum,
                                                          expected):
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ValueError, match=f"{raw!r} for the environment variable {NAME}: "
                                         f"{expected}"):
        env_number(NAME, 1, kind=kind, minimum=minimum)


def test_a_bad_number_can_warn_and_give_the_default(monkeypatch):
    monkeypatch.setenv(NAME, "-3")
    with pytest.warns(UserWarning, match=f"'-3' for the environment variable {NAME}: "
                                         "expected an integer of at least 0; using 4"):
        assert env_number(NAME, 4, minimum=0, warn=True) == 4
    monkeypatch.setenv(NAME, "8")
    assert env_number(NAME, 4, minimum=0, warn=True) == 8


def test_number_kind_is_int_or_float():
    with pytest.raises(TypeError, match="int or float"):
        env_number(NAME, 1, kind=bool)


def test_numeric_settings_read_it(monkeypatch):
    """The numba backend's numeric settings: valid values as before; a bad one is named in a
    warning and gives the default (``PLAX_NUMBA_WORKERS``: was silent; the others as before),
    since they are read on the compile thread, or where tiering's choice must not fail."""
    tiered = pytest.importorskip("plax_numba.tiered")
    from plax_numba import compile_worker, starvation_guard
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "0")   # (at least 1, as before)
    assert tiered.compile_after() == 1
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2x")
    with pytest.warns(UserWarning, match="PLAX_NUMBA_COMPILE_AFTER: expected an integer"):
        assert tiered.compile_after() == 2
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "-1")   # (none, as before)
    assert compile_worker.workers_wanted() == 0
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "two")
    with pytest.warns(UserWarning, match="'two' for the environment variable PLAX_NUMBA_WORKERS"):
        assert compile_worker.workers_wanted() == 1
    monkeypatch.setenv("PLAX_NUMBA_CHOICE_TRIALS", "5")
    assert tiered.choice_trials() == 5
    monkeypatch.setenv("PLAX_NUMBA_CHOICE_TRIALS", "some")
    with pytest.warns(UserWarning, match="PLAX_NUMBA_CHOICE_TRIALS"):
        assert tiered.choice_trials() == tiered.CHOICE_TRIALS
    monkeypatch.setenv("PLAX_NUMBA_GUARD_INTERVAL", " 0.5 ")
    assert starvation_guard.guard_interval() == 0.5
    monkeypatch.setenv("PLAX_NUMBA_GUARD_CHECKS", "0")   # (at least 1, as before)
    assert starvation_guard.guard_checks() == 1
    backend = pytest.importorskip("plax_numba.backend")
    monkeypatch.setenv("PLAX_NUMBA_WHOLE_MAX", "0")
    assert backend.whole_max() == 0
    monkeypatch.setenv("PLAX_NUMBA_WHOLE_MAX", "big")   # (was: silently the default)
    with pytest.warns(UserWarning, match="PLAX_NUMBA_WHOLE_MAX"):
        assert backend.whole_max() == backend.WHOLE_MAX
    monkeypatch.setenv("PLAX_NUMBA_GUARD_MIN_SHARE", "-0.1")
    with pytest.warns(UserWarning, match="at least 0"):
        assert starvation_guard.guard_min_share() == starvation_guard.GUARD_MIN_SHARE


@pytest.mark.parametrize("raw, bounds, expected", [
    ("0", dict(above=0), "expected a number above 0"),
    ("1.5", dict(above=0, maximum=1), "expected a number above 0 and at most 1"),
    ("-1", dict(minimum=0, maximum=3), "expected a number of at least 0 and at most 3")])
def test_bounds_name_what_is_accepted(monkeypatch, raw, bounds, expected):
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ValueError, match=f"{raw!r} for the environment variable {NAME}: "
                                         f"{expected}, or leave it unset"):
        env_number(NAME, 1.0, kind=float, **bounds)
    assert env_number(NAME, 1.0, kind=float) == float(raw)   # (no bounds: accepted)


def test_bounds_are_inclusive_or_not_as_named(monkeypatch):
    monkeypatch.setenv(NAME, "1")
    assert env_number(NAME, 0.5, kind=float, above=0, maximum=1) == 1.0
    assert env_number(NAME, 0, minimum=1) == 1
    with pytest.raises(ValueError, match="above 1"):
        env_number(NAME, 0, above=1)


def test_choices(monkeypatch):
    from plax.config import env_choice
    monkeypatch.setenv(NAME, " warn ")
    assert env_choice(NAME, "allow", ("allow", "warn")) == "warn"
    monkeypatch.setenv(NAME, "WARN")   # (spelt exactly, as JAX reads its enum variables)
    with pytest.raises(ValueError, match=f"'WARN' for the environment variable {NAME}: "
                                         "expected one of allow, warn, or leave it unset"):
        env_choice(NAME, "allow", ("allow", "warn"))
    monkeypatch.setenv(NAME, "")
    assert env_choice(NAME, None, ("allow", "warn")) is None


def test_collective_timeout_reads_it(monkeypatch):
    from plax.distributed import collective_timeout
    monkeypatch.delenv("PLAX_COLLECTIVE_TIMEOUT", raising=False)
    assert collective_timeout() == 300.0
    monkeypatch.setenv("PLAX_COLLECTIVE_TIMEOUT", "0.5")
    assert collective_timeout() == 0.5
    for bad in ("0", "-2", "soon", "nan"):
        monkeypatch.setenv("PLAX_COLLECTIVE_TIMEOUT", bad)
        with pytest.raises(ValueError, match=f"{bad!r} for the environment variable "
                                             "PLAX_COLLECTIVE_TIMEOUT: expected a number above 0"):
            collective_timeout()


def test_gpu_memory_fraction_reads_it(monkeypatch):
    """``plax_cupy.runtime`` imports without CuPy (it only finds out whether CuPy is there)."""
    memory_fraction = pytest.importorskip("plax_cupy.runtime").memory_fraction
    monkeypatch.delenv("PLAX_GPU_MEMORY_FRACTION", raising=False)
    assert memory_fraction() is None
    monkeypatch.setenv("PLAX_GPU_MEMORY_FRACTION", "1")
    assert memory_fraction() == 1.0
    for bad in ("0", "1.01", "half"):
        monkeypatch.setenv("PLAX_GPU_MEMORY_FRACTION", bad)
        with pytest.raises(ValueError, match=f"{bad!r} for the environment variable "
                                             "PLAX_GPU_MEMORY_FRACTION: expected a number "
                                             "above 0 and at most 1"):
            memory_fraction()

"""``plax.config.env_flag``: the one parse of the on/off environment variables of plax and its
backends (``PLAX_CUDA_GRAPHS``, ``PLAX_NUMBA_SYNC``, ``PLAX_PMAP_LIMIT_BLAS``, ...): the
accepted words, the default when unset or empty, and a ValueError naming the variable for
anything else (a typo no longer reads as "on")."""
from __future__ import annotations

import pytest

from plax.config import env_flag

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
        assert blas_threads._depth[0] == 0


def test_the_words_are_jax_s(monkeypatch):
    """Every word JAX's boolean variables accept reads as JAX reads it (``JAX_ENABLE_X64=t``
    is on in JAX: ``import plax`` must not refuse it)."""
    bool_env = pytest.importorskip("jax._src.config").bool_env
    for word in ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"):
        for raw in (word, word.upper()):
            monkeypatch.setenv(NAME, raw)
            assert env_flag(NAME, False) is bool_env(NAME, False), raw

"""Fixtures of the Numba backend's tests: skip without numba, make the backend available.

Until the ``numba`` entry point is declared in pyproject.toml the backend is registered by
hand for each module (and removed afterwards, so other tests keep their default backend);
from a checkout whose editable install predates ``backends/plax_numba``, the package is
imported from the source tree.
"""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("numba", reason="the Numba backend's tests need numba (pip install numba)")

try:
    import plax_numba  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "backends"))
    import plax_numba  # noqa: F401


@pytest.fixture(scope="module", autouse=True)
def numba_backend():
    """The ``numba`` backend object (registered by hand if no entry point provides it)."""
    from plax import plugins
    import plax_numba.plugin
    registered = None
    if "numba" not in plugins.registry().backends:
        registered = plugins.register_plugin(plax_numba.plugin, name="numba-tests")
    try:
        yield plugins.registry().get_backend("numba")
    finally:
        if registered is not None:
            plugins.unregister_plugin(registered)


@pytest.fixture(autouse=True)
def sync_compile(monkeypatch):
    """Kernels compile at jit time (no tiering), so tests see compiled kernels at once; a
    test that tiers sees numba's kernels replace the reference path directly (the LLVM first
    tier, :mod:`plax_numba.llvm_tier`, is off unless a test turns it on: its own tests do)."""
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    monkeypatch.setenv("PLAX_NUMBA_FIRST_TIER", "0")

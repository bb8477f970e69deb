"""The Numba backend's pytest plugin: the conformance kit checks compiled kernels.

Outside tests, kernels compile in the background once a cluster is hot
(:mod:`plax_numba.tiered`), so a function called once runs on the reference kernels. The
conformance kit (``pytest --pyargs plax.testing.conformance --plax-backend=numba``, and the
kit's tests inside plax's own suite) is this backend's acceptance test, so its tests run
with ``PLAX_NUMBA_SYNC=1``: every cluster is compiled before its first call and the checks
compare the kernels themselves against NumPy, JAX and finite differences. An explicit
``PLAX_NUMBA_SYNC`` in the environment wins.

Registered as a ``pytest11`` entry point of the plax distribution; it imports neither plax
nor numba.
"""
from __future__ import annotations

import os

import pytest

_KIT = "plax.testing.conformance"


def _in_kit(item) -> bool:
    module = getattr(item, "module", None)
    name = getattr(module, "__name__", "") or ""
    return name == _KIT or name.startswith(_KIT + ".")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if "PLAX_NUMBA_SYNC" in os.environ or not _in_kit(item):
        yield
        return
    os.environ["PLAX_NUMBA_SYNC"] = "1"
    try:
        yield
    finally:
        os.environ.pop("PLAX_NUMBA_SYNC", None)

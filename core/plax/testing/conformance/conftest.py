"""Fixtures of the conformance suite: 64-bit types for the cases that need them."""
from __future__ import annotations

import pytest

import plax


def pytest_configure(config):
    config.addinivalue_line("markers", "x64: the test runs with jax_enable_x64 turned on")


@pytest.fixture
def x64():
    """Turns on ``jax_enable_x64`` for one test and restores the previous value afterwards."""
    old = plax.config.read("jax_enable_x64")
    plax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        plax.config.update("jax_enable_x64", old)


@pytest.fixture(autouse=True)
def _x64_when_marked(request):
    """Tests marked ``x64`` (cases with 64-bit dtypes) run with x64 on."""
    if request.node.get_closest_marker("x64") is None:
        yield
        return
    request.getfixturevalue("x64")
    yield


@pytest.fixture
def eager_backend(backend_name):
    """Makes ``backend_name`` run eager work on its devices for one test (``PLAX_BACKEND``), so
    the transform checks (grad, vmap), which run eagerly, exercise the backend under test."""
    import importlib
    import os

    devices = importlib.import_module("plax.devices")  # the module (plax.devices is a function)
    old = os.environ.get("PLAX_BACKEND")
    os.environ["PLAX_BACKEND"] = backend_name
    devices._invalidate_caches()
    try:
        yield backend_name
    finally:
        if old is None:
            del os.environ["PLAX_BACKEND"]
        else:
            os.environ["PLAX_BACKEND"] = old
        devices._invalidate_caches()

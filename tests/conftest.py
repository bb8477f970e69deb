"""Shared pytest configuration: ``--plax-backend`` selects the backends under test.

Tests that take the ``backend_name`` fixture run once per selected backend
(default: every installed backend), which is how a new backend package runs
the conformance suite: ``pytest tests/conformance --plax-backend=NAME``.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--plax-backend", action="append", default=None, metavar="NAME",
                     help="backend to test (repeatable); default: all installed backends")


def selected_backends(config) -> list[str]:
    from plax import plugins
    names = config.getoption("plax_backend")
    available = sorted(plugins.registry().backends)
    if not names:
        return available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise pytest.UsageError(f"--plax-backend {unknown} not installed; available: {available}")
    return names


def pytest_generate_tests(metafunc):
    if "backend_name" in metafunc.fixturenames:
        metafunc.parametrize("backend_name", selected_backends(metafunc.config))


@pytest.fixture
def backend(backend_name):
    from plax import plugins
    return plugins.registry().get_backend(backend_name)

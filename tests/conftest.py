"""Shared pytest configuration: ``--plax-backend`` selects the backends under test.

The option is defined once, by the conformance kit's pytest plugin
(``plax.testing.conformance.plugin``), loaded here by name so that a checkout works whatever
its installed metadata says (the plax distribution also declares it as a ``pytest11`` entry
point of the same name, which pytest then loads only once). Tests here that take the
``backend_name`` fixture run once per selected backend (default: every installed backend).
The kit itself (``pytest --pyargs plax.testing.conformance --plax-backend=NAME``) is collected
from ``core/plax/testing/conformance`` through ``testpaths``, with its own fixtures.
"""
from __future__ import annotations

import pytest

pytest_plugins = ["plax.testing.conformance.plugin"]


def pytest_generate_tests(metafunc):
    if "backend_name" in metafunc.fixturenames:
        from plax.testing.conformance.plugin import selected_backends
        metafunc.parametrize("backend_name", selected_backends(metafunc.config))


@pytest.fixture
def backend(backend_name):
    from plax import plugins
    return plugins.registry().get_backend(backend_name)

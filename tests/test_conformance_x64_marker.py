"""The conformance kit's ``x64`` marker is registered by the kit's pytest plugin at start-up
(``plax.testing.conformance.plugin``), so modules outside the kit that import its specs (which
mark 64-bit cases ``x64``) raise no ``PytestUnknownMarkWarning``."""
from __future__ import annotations

import warnings

import pytest


def test_x64_marker_registered_at_start_up(pytestconfig):
    assert any(line.startswith("x64:") for line in pytestconfig.getini("markers"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", pytest.PytestUnknownMarkWarning)
        from plax.testing.conformance import specs
        params = specs.value_params(specs.ALL_SPECS)
    assert any(m.name == "x64" for p in params for m in p.marks)

"""Conformance of every primitive (specs in spec_*.py, one module per family): values against
NumPy (eager and jit, every accepted dtype), gradients against finite differences, JVP/VJP
consistency on every case, and vmap against a Python loop."""
from __future__ import annotations

import pytest

from .harness import check_grads_of, check_linearization, check_values, check_vmap
from .specs import ALL_SPECS, linearization_params, spec_params, value_params


@pytest.mark.parametrize("spec,dtype", value_params(ALL_SPECS))
def test_values(spec, dtype, backend, backend_name):
    check_values(spec, dtype, backend, backend_name)


@pytest.mark.parametrize("spec", spec_params(ALL_SPECS, "grad"))
def test_grads(spec, backend_name):
    check_grads_of(spec, backend_name)


@pytest.mark.parametrize("spec,dtype", linearization_params(ALL_SPECS))
def test_jvp_vjp_consistent(spec, dtype, backend_name):
    check_linearization(spec, dtype, backend_name)


@pytest.mark.parametrize("spec", spec_params(ALL_SPECS, "vmap"))
def test_vmap(spec, backend_name):
    check_vmap(spec, backend_name)

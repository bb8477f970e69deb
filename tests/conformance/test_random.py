"""Conformance of the PRNG primitives (specs in spec_random.py): threefry2x32 bit for bit
against an independent Python Threefry (eager and jit), random_gamma_grad against SciPy
implicit differentiation, and vmap against a Python loop."""
from __future__ import annotations

import pytest

from .harness import check_values, check_vmap
from .specs import FAMILIES, spec_params, value_params

SPECS = FAMILIES["random"]


@pytest.mark.parametrize("spec,dtype", value_params(SPECS))
def test_values(spec, dtype, backend, backend_name):
    check_values(spec, dtype, backend, backend_name)


@pytest.mark.parametrize("spec", spec_params(SPECS, "vmap"))
def test_vmap(spec, eager_backend):
    check_vmap(spec, eager_backend)

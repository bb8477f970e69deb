"""Conformance of the indexing primitives (specs in spec_indexing.py): values against NumPy
(eager and jit, every accepted dtype), gradients against finite differences, and vmap against a Python loop."""
from __future__ import annotations

import pytest

from .harness import check_grads_of, check_values, check_vmap
from .specs import FAMILIES, spec_params, value_params

SPECS = FAMILIES["indexing"]


@pytest.mark.parametrize("spec,dtype", value_params(SPECS))
def test_values(spec, dtype, backend, backend_name):
    check_values(spec, dtype, backend, backend_name)


@pytest.mark.parametrize("spec", spec_params(SPECS, "grad"))
def test_grads(spec, eager_backend):
    check_grads_of(spec)


@pytest.mark.parametrize("spec", spec_params(SPECS, "vmap"))
def test_vmap(spec, eager_backend):
    check_vmap(spec, eager_backend)

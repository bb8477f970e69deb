"""float0 tangents on every backend: no backend ever holds a float0 value (plax.float0).

``vmap(jvp(f))`` with integer outputs, ``jacfwd`` of integer outputs, ``grad(...,
allow_int=True)`` and ``vjp`` with integer inputs give float0 tangents. They must work, with
JAX's types (float0 results are NumPy arrays), dtypes, shapes and values, eagerly and under
``jit`` on the NumPy and Numba backends and on the simulated GPU, whose backend (like CuPy)
has no float0 buffers (issue 24: ``device_put: dtype float0`` on CuPy). The cases are in
tests/float0_cases.py.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import plax
from plax import lax

from float0_cases import jax_report, report
from subprocess_util import last_json, run_python

TESTS = Path(__file__).resolve().parent
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed (comparisons with JAX)")


@pytest.fixture(scope="module")
def want():
    return jax_report()


def _compare(got: dict, want: dict, where: str) -> None:
    for name, expected in want.items():
        assert got[name] == expected, f"{where} {name}: plax {got[name]} != JAX {expected}"


@needs_jax
@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    not HAVE_NUMBA, reason="numba is not installed"))])
def test_float0_tangents_under_jit_match_jax(backend, want):
    _compare(report(backend, jit=True), want, f"jit(backend={backend!r})")


@needs_jax
def test_float0_tangents_eagerly_match_jax(want):
    with plax.default_device(plax.devices("cpu")[0]):
        _compare(report(), want, "eager")


_FAKE_GPU = """
    import json, sys
    sys.path[:0] = [{tests!r}, {cupy_tests!r}]
    import fake_cupy_plugin  # the simulated GPU, the default platform
    import plax
    from float0_cases import report
    print(json.dumps({{"default": repr(plax.devices()[0]), "eager": report(),
                      "jit": report("cupy", jit=True), "jit_numpy": report("numpy", jit=True)}}))
"""


@needs_jax
def test_float0_tangents_on_the_simulated_gpu_match_jax(want):
    out = last_json(run_python(_FAKE_GPU.format(tests=str(TESTS), cupy_tests=str(TESTS / "cupy")),
                               TESTS.parent / "backends", timeout=300))
    assert out["default"] == "CudaDevice(id=0)"
    for where in ("eager", "jit", "jit_numpy"):
        _compare(out[where], want, f"simulated GPU {where}")


def test_float0_values_never_reach_a_backend():
    """Broadcasting a float0 zero (what vmap does to a zero tangent) gives a NumPy array, a
    float0 constant of a compiled program is not put on the device, and a compiled program's
    float0 result is NumPy zeros: the backend's ``put`` and ``compile`` never see float0."""
    z = np.zeros(3, plax.dtypes.float0)
    out = lax.broadcast_in_dim(z, (2, 3), (1,))
    assert type(out) is np.ndarray and out.dtype == plax.dtypes.float0 and out.shape == (2, 3)
    backend = plax.devices("cpu")[0].backend
    seen = []
    original_put, original_compile = backend.put, backend.compile
    backend.put = lambda host, device: (seen.append(np.asarray(host).dtype),
                                        original_put(host, device))[1]
    backend.compile = lambda jaxpr, device: (seen.extend(
        v.aval.dtype for e in jaxpr.eqns for v in [*e.invars, *e.outvars]),
        seen.extend(v.aval.dtype for v in jaxpr.outvars), original_compile(jaxpr, device))[2]
    try:
        f = plax.jit(lambda x, t: (x * 2.0, lax.broadcast_in_dim(t, (2, 3), (1,))))
        y, t = f(np.ones(3, np.float32), z)
    finally:
        del backend.put, backend.compile
    assert plax.dtypes.float0 not in seen
    assert type(t) is np.ndarray and t.dtype == plax.dtypes.float0 and t.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(y), np.full(3, 2.0, np.float32))


def test_arithmetic_on_float0_is_a_type_error_as_in_jax():
    z = np.zeros(3, plax.dtypes.float0)
    with pytest.raises(TypeError, match="Called add with a float0 at position 0"):
        lax.add(z, z)

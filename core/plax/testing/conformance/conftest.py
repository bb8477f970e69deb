"""Fixtures of the conformance kit (they apply to the kit's tests only).

* ``backend_name``: the name of the backend under test; tests that take it (or ``backend``)
  run once per selected backend (``--plax-backend``, default: every installed backend), and
  the whole module runs with that backend *pinned*: it is the executor of eager work on its
  platform (as ``PLAX_BACKEND=name`` would make it), so the transform checks (grad, vmap),
  which run eagerly, exercise it even where another backend of the same platform has a higher
  priority. Compiled checks name it explicitly (``jit(f, backend=name)``).
* ``backend``: the Backend object under test.
* ``x64``: 64-bit types for one test (tests marked ``x64`` get it automatically).

``--plax-conformance-quick`` keeps a sample of the kit (see :func:`_quick_keep`).
"""
from __future__ import annotations

import contextlib
import os

import pytest

import plax

from .plugin import selected_backends

# Primitives the quick selection keeps for the transform checks: one or two of each family.
QUICK_PRIMITIVES = {
    "add", "mul", "exp", "max", "select_n", "convert_element_type", "broadcast_in_dim",
    "reshape", "transpose", "pad", "concatenate", "dynamic_slice", "gather", "scatter-add",
    "reduce_sum", "reduce_max", "argmax", "cumsum", "sort", "dot_general", "threefry2x32",
}
QUICK_DTYPES = {"float32", "int32", "bool", "uint32"}


def pytest_configure(config):
    # (the ``x64`` marker is registered by the kit's plugin, loaded at start-up)
    if config.getoption("plax_conformance_quick", False):
        from . import harness
        harness.QUICK = True  # fewer hypothesis examples (read when the test modules load)


def pytest_generate_tests(metafunc):
    if "backend_name" in metafunc.fixturenames:
        # module scope: pytest runs a module's tests backend by backend, pinning each once
        metafunc.parametrize("backend_name", selected_backends(metafunc.config), indirect=True,
                             scope="module")


@contextlib.contextmanager
def pinned_backend(name: str):
    """Makes backend ``name`` the executor of eager work (and its first device the default
    device) inside the block, through ``PLAX_BACKEND`` and a rebuild of the plugin registry;
    the previous setting is restored afterwards.

    Yields:
      The Backend object (the rebuilt registry's).
    """
    from plax import plugins
    old = os.environ.get("PLAX_BACKEND")
    os.environ["PLAX_BACKEND"] = name
    plugins.reset()
    try:
        reg = plugins.registry()
        reg.check_environment()
        backend = reg.get_backend(name)
        runs = [d.backend.name for d in plax.devices(backend=name)]
        assert runs and set(runs) == {name}, (
            f"pinning backend {name!r} failed: its devices run eager work on {runs}")
        yield backend
    finally:
        if old is None:
            os.environ.pop("PLAX_BACKEND", None)
        else:
            os.environ["PLAX_BACKEND"] = old
        plugins.reset()


@pytest.fixture(scope="module")
def backend_name(request):
    """The backend under test, pinned for the module (see :func:`pinned_backend`)."""
    with pinned_backend(request.param):
        yield request.param


@pytest.fixture(scope="module")
def backend(backend_name):
    from plax import plugins
    return plugins.registry().get_backend(backend_name)


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


def _quick_keep(item) -> bool:
    """Whether the quick selection keeps ``item``: every check of the sample primitives
    (values in float32/int32/bool/uint32 only), the coverage tests that run on the backend,
    and a few random programs; the backend-independent tables (abstract-eval errors, dtype
    rejection) are left out."""
    module = item.module.__name__.rsplit(".", 1)[-1]
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec else {}
    spec = params.get("spec")
    if module in ("test_errors",) or item.originalname == "test_rejects_unaccepted_dtype":
        return False
    if spec is not None:
        if spec.name not in QUICK_PRIMITIVES:
            return False
        dtype = params.get("dtype")
        return dtype is None or dtype in QUICK_DTYPES
    if "prim" in params:
        return params["prim"].name in QUICK_PRIMITIVES
    return True


def pytest_collection_modifyitems(config, items):
    if not config.getoption("plax_conformance_quick", False):
        return
    package = __name__.rsplit(".", 1)[0]  # plax.testing.conformance
    keep, drop = [], []
    for item in items:
        mod = getattr(item, "module", None)
        mine = mod is not None and mod.__name__.startswith(package + ".")
        (keep if not mine or _quick_keep(item) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

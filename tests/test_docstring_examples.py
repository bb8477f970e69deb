"""Every docstring example of plax and of its first-party transform plugins runs and prints
what it says (doctest), one test case per module.

The modules are found on disk: every ``.py`` file of the ``plax`` package (``core/plax``), of
the CPU backends ``plax_numpy`` and ``plax_numba``, and of the transform plugins
``plax_checkify``, ``plax_jet``, ``plax_cost_analysis`` and ``plax_pmap``, except the
conformance kit's test modules. A module that needs an optional dependency that is absent is
skipped, naming it. (``plax_cupy``'s examples take CuPy arrays on a GPU, which the CPU devices
these examples run on are not.)

The examples see their module's globals plus the names a JAX user has at hand: ``jax`` (plax
itself, as in ``import plax as jax``), ``plax``, ``jnp``, ``np``, ``lax`` and ``random``
(``from plax import numpy as jnp, lax, random``). Printed floats are
compared as :mod:`doctest_util` says: a float printed to full precision may differ from the
example in its last digits (the machine's libm), a short decimal (``-2.``, ``0.08``) must be
printed exactly, so an example whose value may move in the last digit prints it rounded.
Examples run on the CPU devices (they print ``CpuDevice``), on the default CPU backend (Numba's
where it is installed; ``PLAX_BACKEND=numpy`` runs them on the reference backend), and each
module starts from the default flags and plugin registry: what an example changes (a flag, a
plugin registered by hand) is put back after its module.
"""
from __future__ import annotations

import builtins
import doctest
import importlib
import importlib.util
import pathlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import plugins
from doctest_util import run_doctests

PACKAGES = ["plax", "plax_numpy", "plax_numba", "plax_checkify", "plax_jet", "plax_cost_analysis",
            "plax_pmap"]
# test modules, not library code: pytest collects them (``pytest --pyargs plax.testing.conformance``)
EXCLUDED = ("plax.testing.conformance",)
OPTIONFLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
# modules that must keep examples (a docstring reshuffle must not lose them silently)
MUST_HAVE_EXAMPLES = {
    "plax.numpy", "plax.numpy.creation", "plax.numpy.ufuncs", "plax.numpy.reductions",
    "plax.numpy.shape_ops", "plax.numpy.products", "plax.numpy.searching", "plax.numpy.indexing",
    "plax.numpy.util", "plax.numpy.fft", "plax.numpy.linalg", "plax.numpy.math_extras",
    "plax.numpy.polynomial", "plax.numpy.window_functions", "plax.numpy.histograms",
    "plax.numpy.statistics", "plax.numpy.calculus", "plax.lax.fft", "plax.lax.linalg",
    "plax.nn.activations", "plax.nn.softmax", "plax.nn.one_hot", "plax.nn.attention",
    "plax.nn.initializers", "plax.scipy.linalg", "plax.tree_util", "plax.tree",
    "plax.pytrees.engine", "plax.sharding", "plax.array", "plax.device",
}


def _modules(package: str) -> list[str]:
    """The dotted names of ``package`` and of every module below it, found without importing."""
    spec = importlib.util.find_spec(package)
    if spec is None:  # a plugin that is not installed: its one test case says so
        return [package]
    names = []
    for root in spec.submodule_search_locations or []:
        root = pathlib.Path(root)
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(not p.isidentifier() for p in parts):
                continue
            names.append(".".join((package, *parts)))
    return [n for n in names if not n.startswith(EXCLUDED)]


MODULES = sorted({name for package in PACKAGES for name in _modules(package)})


def _import(name: str):
    """Imports module ``name``, or skips the test naming the optional dependency it lacks."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        missing = (err.name or "").split(".")[0]
        if missing and missing not in PACKAGES:
            pytest.skip(f"{name} needs the optional dependency {missing!r}, which is not installed")
        if name.split(".")[0] != "plax" and missing == name.split(".")[0]:
            pytest.skip(f"the plugin {missing!r} is not installed")
        raise


@pytest.fixture(scope="module")
def cpu_devices():
    """CPU devices only (the examples print ``CpuDevice``), and no plugin registered by hand.

    Module-scoped: rediscovering the plugins costs about 30 ms, which once per example module
    was most of this file's time.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAX_PLATFORMS", "cpu")
        manual = list(plugins._manual)
        plugins._manual.clear()
        plugins.reset()
        try:
            yield
        finally:
            plugins._manual[:] = manual
            plugins.reset()


@pytest.fixture
def clean_state(cpu_devices):
    """Puts back what a module's examples changed: flags, hand-registered plugins, NumPy's
    print options (the registry is rediscovered only where the plugins changed)."""
    flags = dict(plax.config._values)
    manual = list(plugins._manual)
    old_print = np.get_printoptions()
    try:
        yield
    finally:
        np.set_printoptions(**old_print)
        for key, value in flags.items():
            if plax.config.read(key) != value:
                plax.config.update(key, value)
        if plugins._manual != manual:
            plugins._manual[:] = manual
            plugins.reset()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, clean_state):
    module = _import(name)
    # the module's globals, less those that shadow builtins: ``print`` in an example of
    # plax.debug, or ``round`` in one of plax.numpy, is Python's, as it is for a user
    globs = {k: v for k, v in vars(module).items() if not hasattr(builtins, k) or k.startswith("__")}
    globs.update({"jax": plax, "plax": plax, "jnp": jnp, "np": np, "lax": plax.lax,
                  "random": plax.random})
    # functions made by factories inside a module are found through its namespace too
    tests = doctest.DocTestFinder().find(module, name, globs=globs)
    result = run_doctests(tests, optionflags=OPTIONFLAGS)
    assert result.failed == 0, (f"{result.failed} of {result.attempted} docstring examples of {name} "
                                f"failed, in {', '.join(result.failed_names)} (their reports: stdout)")
    if name in MUST_HAVE_EXAMPLES:
        assert result.attempted > 0, f"{name} has lost its docstring examples"


def test_every_package_is_walked():
    for package in ["plax.numpy", "plax.lax", "plax.scipy.linalg", "plax.nn", "plax.random",
                    "plax.tree_util", "plax_numpy", "plax_numba", "plax_checkify", "plax_jet",
                    "plax_cost_analysis", "plax_pmap"]:
        assert package in MODULES
    assert len(MODULES) > 150
    assert MUST_HAVE_EXAMPLES <= set(MODULES)
    assert not any(n.startswith("plax.testing.conformance") for n in MODULES)

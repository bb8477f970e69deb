"""Every docstring example of plax and of its first-party transform plugins runs and prints
what it says (doctest), one test case per module.

The modules are found on disk: every ``.py`` file of the ``plax`` package (``core/plax``) and
of ``plax_checkify``, ``plax_jet`` and ``plax_cost_analysis``, except the conformance kit's
test modules. A module that needs an optional dependency that is absent is skipped, naming it.

The examples see their module's globals plus the names a JAX user has at hand: ``jax`` (plax
itself, as in ``import plax as jax``), ``plax``, ``jnp``, ``np``, ``lax`` and ``random``
(``from plax import numpy as jnp, lax, random``). Printed floats are
compared to a few ulps (:mod:`doctest_util`): the examples must not depend on the last digits
of the machine's libm. Examples run on the CPU devices (they print ``CpuDevice``), and each
module starts from, and leaves, the default flags and plugin registry.
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

PACKAGES = ["plax", "plax_checkify", "plax_jet", "plax_cost_analysis", "plax_pmap"]
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


@pytest.fixture
def clean_state(monkeypatch):
    """The default flags, CPU devices only and no hand-registered plugins, before and after."""
    monkeypatch.setenv("PLAX_PLATFORMS", "cpu")  # the examples print CPU devices
    flags = dict(plax.config._values)
    manual = list(plugins._manual)
    plugins.reset()
    old_print = np.get_printoptions()
    try:
        yield
    finally:
        np.set_printoptions(**old_print)
        for key, value in flags.items():
            if plax.config.read(key) != value:
                plax.config.update(key, value)
        plugins._manual[:] = manual
        monkeypatch.delenv("PLAX_PLATFORMS")
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
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
    if name in MUST_HAVE_EXAMPLES:
        assert result.attempted > 0, f"{name} has lost its docstring examples"


def test_every_package_is_walked():
    for package in ["plax.numpy", "plax.lax", "plax.scipy.linalg", "plax.nn", "plax.random",
                    "plax.tree_util", "plax_checkify", "plax_jet", "plax_cost_analysis"]:
        assert package in MODULES
    assert len(MODULES) > 150
    assert MUST_HAVE_EXAMPLES <= set(MODULES)
    assert not any(n.startswith("plax.testing.conformance") for n in MODULES)

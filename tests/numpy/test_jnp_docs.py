"""The examples in plax.numpy's docstrings run and print what they say (doctest)."""
from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from doctest_util import run_doctests

MODULES = ["plax.numpy", "plax.numpy.creation", "plax.numpy.ufuncs", "plax.numpy.reductions",
           "plax.numpy.shape_ops", "plax.numpy.products", "plax.numpy.searching",
           "plax.numpy.indexing", "plax.numpy.util"]  # the modules whose docstrings have examples


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    globs = {"jnp": jnp, "np": np, "plax": plax, "lax": plax.lax}
    # factory-made functions live in the module's namespace but are found through it too
    tests = doctest.DocTestFinder().find(module, name, globs=globs)
    # printed float32 values may differ in the last digit with the NumPy build and the CPU's
    # vector math, so floats are compared to a few ulps (see doctest_util)
    result = run_doctests(tests)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring examples of {name} failed"


def test_factory_made_functions_have_verified_examples():
    from plax.numpy import ufuncs
    for name in ufuncs._EXAMPLES:
        doc = getattr(jnp, name).__doc__
        assert "Args:" in doc and "Returns:" in doc and ">>> jnp." in doc, name

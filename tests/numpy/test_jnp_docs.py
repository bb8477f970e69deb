"""The examples in plax.numpy's docstrings run and print what they say (doctest)."""
from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp

MODULES = ["plax.numpy", "plax.numpy.creation", "plax.numpy.ufuncs", "plax.numpy.reductions",
           "plax.numpy.shape_ops", "plax.numpy.products", "plax.numpy.searching",
           "plax.numpy.indexing", "plax.numpy.util", "plax.numpy.array_methods",
           "plax.numpy.scalar_types", "plax.numpy._einsum"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    globs = {"jnp": jnp, "np": np, "plax": plax, "lax": plax.lax}
    tests = finder.find(module, name, globs=globs)
    # factory-made functions live in the module's namespace but are found through it too
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring examples of {name} failed"


def test_factory_made_functions_have_verified_examples():
    from plax.numpy import ufuncs
    for name in ufuncs._EXAMPLES:
        doc = getattr(jnp, name).__doc__
        assert "Args:" in doc and "Returns:" in doc and ">>> jnp." in doc, name

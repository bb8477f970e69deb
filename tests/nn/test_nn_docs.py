"""The examples in plax.nn's docstrings run and print what they say (doctest), and every
public function has a JAX-style docstring."""
from __future__ import annotations

import doctest
import importlib
import inspect

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from doctest_util import run_doctests

MODULES = ["plax.nn", "plax.nn.activations", "plax.nn.softmax", "plax.nn.one_hot",
           "plax.nn.attention", "plax.nn.initializers"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    globs = {"jnp": jnp, "np": np, "plax": plax}
    tests = doctest.DocTestFinder().find(module, name, globs=globs)
    result = run_doctests(tests)
    if name != "plax.nn":
        assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring examples of {name} failed"


def test_every_public_function_is_documented():
    from plax import nn
    for name in nn.__all__ + [f"initializers.{n}" for n in nn.initializers.__all__]:
        obj = nn
        for part in name.split("."):
            obj = getattr(obj, part)
        if inspect.ismodule(obj) or obj is jnp.tanh or name.endswith("Initializer"):
            continue
        doc = inspect.getdoc(obj) or ""
        assert "Args:" in doc and "Returns:" in doc and ">>>" in doc, name


def test_import_plax_does_not_load_nn():
    from subprocess_util import run_python
    out = run_python("import sys, plax; print('plax.nn' in sys.modules); plax.nn.relu; "
                     "print('plax.nn' in sys.modules)")
    assert out.stdout.split() == ["False", "True"]

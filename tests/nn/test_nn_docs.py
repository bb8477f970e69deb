"""Every public function of plax.nn has a JAX-style docstring, and ``import plax`` does not
load plax.nn. (The examples run in tests/test_docstring_examples.py.)"""
from __future__ import annotations

import inspect

import plax.numpy as jnp


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

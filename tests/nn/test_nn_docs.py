"""Every public function of plax.nn has a JAX-style docstring. (The examples run in
tests/test_docstring_examples.py; that ``import plax`` does not load plax.nn, and its first use
does, is checked in tests/test_import.py, in a child interpreter shared with the other lazily
loaded families.)"""
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


"""The factory-made functions of plax.numpy have JAX-style docstrings with examples.

The examples themselves run in tests/test_docstring_examples.py, with every other module's.
"""
from __future__ import annotations

import plax.numpy as jnp


def test_factory_made_functions_have_verified_examples():
    from plax.numpy import ufuncs
    for name in ufuncs._EXAMPLES:
        doc = getattr(jnp, name).__doc__
        assert "Args:" in doc and "Returns:" in doc and ">>> jnp." in doc, name

"""pytest configuration for ``pytest --doctest-modules core/plax backends plugins`` (not part
of any package; CI runs the examples through tests/test_docstring_examples.py instead): the
names the docstring examples use without importing them, as JAX's doctests have ``jnp`` and
``np``. An example run this way sees its module's globals plus these: ``plax`` (also as
``jax``, the drop-in spelling of the tutorials), ``jnp``, ``lax``, ``random`` and ``np``. Any
other run (the test suite, CI's conformance kit) is left as it is: nothing imported, and no
need of pytest's doctest plugin (``-p no:doctest`` works).
"""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def _plax_doctest_names(request):
    if not request.config.getoption("doctestmodules", False):
        return
    import plax
    from plax import lax, random
    from plax import numpy as jnp
    request.getfixturevalue("doctest_namespace").update(
        plax=plax, jax=plax, jnp=jnp, lax=lax, random=random, np=np)

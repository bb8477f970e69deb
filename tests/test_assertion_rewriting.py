"""plax's library modules are not assertion-rewritten under pytest (the kit's are).

pytest parses every module it rewrites with :func:`ast.parse`, and the Numba backend imports
its helper modules on its background compile thread: on CPython 3.11 two such parses at once
raise ``SystemError: AST constructor recursion depth mismatch``
(:func:`plax.testing.conformance.plugin.library_modules_not_rewritten`)."""
from __future__ import annotations

import importlib
import sys

import pytest


def _rewrite_hook():
    hook = next((finder for finder in sys.meta_path
                 if type(finder).__name__ == "AssertionRewritingHook"), None)
    if hook is None:
        pytest.skip("pytest's assertion rewriting is off (--assert=plain)")
    return hook


@pytest.mark.parametrize("package, module", [
    ("plax", "plax.ops"), ("plax_numpy", "plax_numpy.registry"),
    ("plax_numba", "plax_numba.libm_free")])
def test_library_modules_are_imported_as_they_are(package, module):
    try:
        parent = importlib.import_module(package)
    except ImportError:
        pytest.skip(f"{package} is not installed")
    assert _rewrite_hook().find_spec(module, parent.__path__) is None, (
        f"pytest would rewrite {module}: a background thread importing it could collide with "
        "the main thread's parse")


def test_the_kits_helpers_are_still_rewritten():
    import plax.testing.conformance as kit
    spec = _rewrite_hook().find_spec("plax.testing.conformance.harness", kit.__path__)
    assert spec is not None and type(spec.loader).__name__ == "AssertionRewritingHook"

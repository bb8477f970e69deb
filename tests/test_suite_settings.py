"""The test session's own settings (tests/conftest.py): Numba's tiering is off outside the
tests of compiled kernels, and kept where they are; the longest tests are collected first."""
from __future__ import annotations

import os

import pytest


def _tests_conftest(config):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")
    for plugin in config.pluginmanager.get_plugins():
        if os.path.abspath(getattr(plugin, "__file__", "") or "") == here:
            return plugin
    pytest.skip("tests/conftest.py is not loaded as a conftest in this session")


def test_tiering_is_off_here(request):
    conftest = _tests_conftest(request.config)
    if conftest.USER_COMPILE_AFTER is not None:
        pytest.skip("PLAX_NUMBA_COMPILE_AFTER is set by the environment, which wins")
    assert os.environ["PLAX_NUMBA_COMPILE_AFTER"] == conftest.NEVER_HOT
    tiered = pytest.importorskip("plax_numba.tiered", reason="the Numba backend is not installed")
    assert tiered.compile_after() == 1 << 62


def test_tiering_kept_for_tests_of_compiled_kernels(request):
    conftest = _tests_conftest(request.config)
    tests = os.path.dirname(os.path.abspath(__file__))
    kept = [("numba/test_tiering_worker.py", "test_x"),
            ("transforms/test_composition.py",
             "test_composition_compiled_matches_reference[numba-cond-jit]"),
            ("test_benchmark_scripts.py", "test_x"), ("test_asv.py", "test_x"),
            ("test_examples.py", "test_x"),
            ("../core/plax/testing/conformance/test_primitives.py", "test_values")]
    for path, name in kept:
        assert conftest.tiering_wanted(os.path.join(tests, path), name), path
    # the composition matrix's functions are called once: the reference path, no compiling
    off = [("lax/test_control_flow.py", "test_x"), ("test_array.py", "test_x"),
           ("numpy/test_jnp_ufuncs.py", "test_x"),
           ("transforms/test_composition.py", "test_composition_matches_reference[cond-jit-numba]")]
    for path, name in off:
        assert not conftest.tiering_wanted(os.path.join(tests, path), name), path


def test_slow_tests_are_collected_first(request):
    """The tests of :data:`SLOW_FIRST` are collected before every other test (pytest-xdist
    hands tests out in collection order), in the list's order."""
    conftest = _tests_conftest(request.config)
    assert conftest.slow_first_rank("tests/test_docs_build.py::test_docs_build_without_warnings") \
        == 0
    assert conftest.slow_first_rank("tests/test_array.py::test_repr") == len(conftest.SLOW_FIRST)
    items = request.session.items
    ranks = [conftest.slow_first_rank(item.nodeid) for item in items]
    assert ranks == sorted(ranks)


def test_composition_matrix_runs_an_entry_on_every_backend_in_a_row(request):
    """tests/transforms/test_composition.py's matrix is collected entry by entry, each entry's
    backends one after another (pytest-xdist then runs them in one process, which reuses the
    entry's reference values and type check)."""
    items = [item for item in request.session.items
             if item.originalname == "test_composition_matches_reference"]
    if not items:
        pytest.skip("the composition matrix is not collected in this session")
    entries = [(item.callspec.params["case"], item.callspec.params["composition"])
               for item in items]
    runs = [entries[0]] + [b for a, b in zip(entries, entries[1:]) if a != b]
    assert len(runs) == len(set(runs)), "an entry's backends are not collected side by side"
    backends = len({item.callspec.params["backend_name"] for item in items})
    assert len(items) == len(runs) * backends


"""Shared pytest configuration: ``--plax-backend`` selects the backends under test.

The option is defined once, by the conformance kit's pytest plugin
(``plax.testing.conformance.plugin``), loaded here by name so that a checkout works whatever
its installed metadata says (the plax distribution also declares it as a ``pytest11`` entry
point of the same name, which pytest then loads only once). Tests here that take the
``backend_name`` fixture run once per selected backend (default: every installed backend).
The kit itself (``pytest --pyargs plax.testing.conformance --plax-backend=NAME``) is collected
from ``core/plax/testing/conformance`` through ``testpaths``, with its own fixtures.

Caches live in a temporary directory of the test session (``XDG_CACHE_HOME``, see
:func:`keep_caches_in_the_session`): the Numba backend's kernels are compiled once per session
and shared by its xdist workers and child interpreters, never left in the user's home. To
keep kernels between runs (a warm rerun of a Numba test), set ``PLAX_NUMBA_CACHE_DIR``.
Bytecode is shared too (tests/bytecode_cache.py): the xdist workers and child interpreters use
one bytecode cache outside the checkout, and the xdist controller assertion-rewrites the test
modules into it before the workers start, instead of each worker rewriting all of them.

Numba's tiering is off outside the tests of compiled kernels (see :func:`tiering_wanted`):
there a cluster that ran twice used to be compiled by a background compile worker, whose
result no test could count on (when it arrives is timing) and which took about as much CPU
as the tests themselves (tests/lax: 27 s in the worker beside 28 s in pytest). Those tests
check the Numba backend's reference path, as before their clusters got hot; its compiled
kernels are checked, with the real setting, by tests/numba (synchronous compilation, and
tiering in its tiering tests), the conformance kit (``PLAX_NUMBA_SYNC=1``), the compiled
composition matrix and the benchmark scripts (child interpreters: default settings). The rest
of the composition matrix runs once-called functions, as users' first calls do: it checks the
Numba backend's reference path, and with tiering on its worker compiled whatever got hot
(72 CPU s beside 56 s of tests, results arriving whenever they did).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import pytest

from bytecode_cache import modules_to_rewrite, rewrite_ahead, share_bytecode_with_the_workers
from session_caches import keep_caches_in_the_session

#: JAX plugins that put JAX on a GPU (their presence means an unconfigured JAX would take one)
JAX_GPU_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm_plugin", "jax_rocm60_plugin")


def share_the_gpu_between_workers(environ=os.environ) -> None:
    """Keeps parallel test processes on one GPU machine from starving each other.

    Runs when this file is loaded (pytest loads it before collecting any test module, so
    before anything imports JAX, and before plax's CuPy backend first touches a device):

    * ``XLA_PYTHON_CLIENT_PREALLOCATE=false``: a JAX on the GPU allocates on demand instead of
      taking 75% of the card in every process that imports it (subprocesses inherit this);
    * JAX is only the tests' reference, so where a GPU build of JAX is installed it is imported
      here with ``JAX_PLATFORMS=cpu`` (which JAX reads at import) and the variable is removed
      again: plax reads ``JAX_PLATFORMS`` too, and its GPU must stay visible to the tests;
    * ``PLAX_GPU_MEMORY_FRACTION``: plax's memory pool gets about 0.8 / (xdist workers) of each
      GPU (CuPy's pool has no limit otherwise, so one worker could hold the whole card).

    Whatever the user set is left alone (``JAX_PLATFORMS=cuda pytest ...`` still compares with
    JAX on the GPU).
    """
    environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        workers = max(1, int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        workers = 1
    environ.setdefault("PLAX_GPU_MEMORY_FRACTION", f"{0.8 / workers:.4f}")
    if "JAX_PLATFORMS" in environ or "jax" in sys.modules:
        return
    if not any(importlib.util.find_spec(name) for name in JAX_GPU_PLUGINS):
        return  # a CPU-only JAX stays on the CPU by itself (and is not imported here: ~1 s)
    environ["JAX_PLATFORMS"] = "cpu"
    try:
        import jax  # noqa: F401  (reads JAX_PLATFORMS now; later backend creation obeys it)
    except ImportError:
        pass
    finally:
        del environ["JAX_PLATFORMS"]


share_the_gpu_between_workers()

# before any plugin configures (and may load the backends) and before xdist starts workers
_session_caches = keep_caches_in_the_session()
# before xdist starts workers too: they and the child interpreters share one bytecode cache
share_bytecode_with_the_workers()


def pytest_configure(config):
    # tests/test_installed_backend.py's child sessions deselect these: they would repeat the
    # same assertions on the same child interpreters
    config.addinivalue_line(
        "markers", "same_with_any_installed_backend: the test sets up every backend its child "
                   "interpreters see, so no installed backend changes its outcome")
    # the xdist controller rewrites the test modules once, before its workers start collecting
    # (each worker rewrote all of them itself: ~22 CPU s apiece); see tests/bytecode_cache.py
    if getattr(config, "workerinput", None) is None and (config.getoption("numprocesses", None)
                                                        or 0) > 1:
        rewrite_ahead(config, modules_to_rewrite(
            (config.invocation_params.dir / arg for arg in config.args),
            config.getini("norecursedirs")))


def pytest_unconfigure(config):
    # the process that made the directory removes it (after its xdist workers are done)
    if _session_caches is not None:
        shutil.rmtree(_session_caches, ignore_errors=True)


pytest_plugins = ["plax.testing.conformance.plugin"]

#: where tests exercise Numba's compiled kernels or its tiering (paths under tests/, or
#: ``path::test name`` prefixes): they keep the product's tiering setting
TIERING_TESTS = ("numba/", "transforms/test_composition.py::test_composition_compiled",
                 "test_benchmark_scripts.py", "test_asv.py", "test_examples.py")
#: ``PLAX_NUMBA_COMPILE_AFTER`` elsewhere: no cluster ever gets hot, nothing is compiled
NEVER_HOT = str(1 << 62)
#: the environment's own setting (it wins over :data:`NEVER_HOT`)
USER_COMPILE_AFTER = os.environ.get("PLAX_NUMBA_COMPILE_AFTER")
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def tiering_wanted(path, name: str = "") -> bool:
    """Whether test ``name`` of file ``path`` keeps Numba's tiering (clusters compiled in the
    background once hot): those in :data:`TIERING_TESTS`, and any file outside tests/."""
    rel = os.path.relpath(os.path.abspath(str(path)), _TESTS_DIR).replace(os.sep, "/")
    return rel.startswith("..") or f"{rel}::{name}".startswith(TIERING_TESTS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # an explicit PLAX_NUMBA_COMPILE_AFTER (the user's, or a parent session's) is left alone
    if USER_COMPILE_AFTER is not None or tiering_wanted(item.path, item.name):
        yield
        return
    os.environ["PLAX_NUMBA_COMPILE_AFTER"] = NEVER_HOT
    try:
        yield
    finally:
        os.environ.pop("PLAX_NUMBA_COMPILE_AFTER", None)


#: Node ID prefixes (from the repository root) of the suite's longest tests, in the order they
#: should start: pytest-xdist's default ``load`` scheduling hands tests to its workers in
#: collection order, so a minutes-long test collected last would keep one worker busy long
#: after the other ran out of work (the two child suites of the installed-backend test, the docs
#: build and the conformance kit's wheel are single tests or fixtures of a minute or more).
#: :func:`pytest_collection_modifyitems` moves them to the front, keeping the order of
#: everything else. A maintained list, not timings measured at run time: a run's order must not
#: depend on the machine. Tests whose kernels another test loads from the session's cache stay
#: where they are (tests/numba/test_special_iterative_forms.py's gamma samplers come after
#: test_threefry_fusion.py's, which compile them).
SLOW_FIRST = (
    "tests/test_docs_build.py::test_docs_build_without_warnings",
    "tests/test_installed_backend.py::test_suite_passes_with_installed_backend",
    "tests/test_conformance_kit.py::",
    "tests/numba/test_threefry_fusion.py::",
    "tests/test_benchmark_scripts.py::",
)


def slow_first_rank(nodeid: str) -> int:
    """The position of ``nodeid``'s prefix in :data:`SLOW_FIRST` (``len(SLOW_FIRST)`` for a
    test not listed)."""
    for rank, prefix in enumerate(SLOW_FIRST):
        if nodeid.startswith(prefix):
            return rank
    return len(SLOW_FIRST)


def pytest_collection_modifyitems(config, items):
    # stable: the listed tests keep their relative order, and so does everything else
    items.sort(key=lambda item: slow_first_rank(item.nodeid))


def pytest_generate_tests(metafunc):
    if "backend_name" in metafunc.fixturenames:
        from plax.testing.conformance.plugin import selected_backends
        metafunc.parametrize("backend_name", selected_backends(metafunc.config))


@pytest.fixture
def backend(backend_name):
    from plax import plugins
    return plugins.registry().get_backend(backend_name)

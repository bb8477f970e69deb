"""The conformance kit's pytest plugin: the ``--plax-backend`` and ``--plax-conformance-quick``
options, and the choice of the backends under test.

Options must exist before pytest parses the command line, and a ``conftest.py`` inside an
installed package is only imported later, while collecting: so the options live here, in a
plugin pytest loads at start-up. It is registered in two ways, both under the name
``plax.testing.conformance.plugin`` (pytest registers a plugin once per name, so when both
apply it is loaded once and no option is added twice):

* the ``pytest11`` entry point of the plax distribution: pytest loads it in any environment
  where plax is installed, which is what makes ``pytest --pyargs plax.testing.conformance
  --plax-backend=NAME`` work from any directory with nothing but the installed packages
  (with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set, add ``-p plax.testing.conformance.plugin``);
* ``pytest_plugins = ["plax.testing.conformance.plugin"]`` in plax's own ``tests/conftest.py``,
  so the repository's tests work from a checkout whatever its installed metadata says.

Loaded in every pytest run of such an environment, the plugin does nothing unless its options
are given (it does not even import plax): the fixtures live in the kit's ``conftest.py`` and
apply to the kit's tests only.
"""
from __future__ import annotations

import re

import pytest

_SELECTED = pytest.StashKey[list]()


def pytest_addoption(parser):
    group = parser.getgroup("plax", "plax conformance kit (plax.testing.conformance)")
    group.addoption(
        "--plax-backend", action="append", default=None, metavar="NAME", dest="plax_backend",
        help="plax backend to test (repeatable); default: every installed backend. "
             "Run the kit with: pytest --pyargs plax.testing.conformance --plax-backend=NAME")
    group.addoption(
        "--plax-conformance-quick", action="store_true", default=False,
        dest="plax_conformance_quick",
        help="run a reduced selection of the conformance kit (a smoke test: a sample of "
             "dtypes and primitives, fewer random programs)")


def library_modules_not_rewritten() -> None:
    """Stops pytest from assertion-rewriting plax's library modules (all but ``plax.testing``).

    pytest rewrites every package of a distribution that declares a ``pytest11`` entry point,
    so plax, plax_numba, ... were parsed with :func:`ast.parse` whenever first imported. The
    Numba backend imports its helper modules on its background compile thread, and CPython
    3.11's AST conversion keeps one recursion counter per interpreter: a parse there while the
    main thread parsed a test module raised ``SystemError: AST constructor recursion depth
    mismatch`` in one thread or the other (a failed kernel, or a crashed session). Library code
    has no test assertions to rewrite; the kit's own helpers (``plax.testing``) stay rewritten.
    Uses the set of marked names of pytest's rewrite hook (the import hook pytest puts on
    :data:`sys.meta_path`); does nothing where that changed.
    """
    import sys
    hook = next((finder for finder in sys.meta_path
                 if type(finder).__name__ == "AssertionRewritingHook"), None)
    marked = getattr(hook, "_must_rewrite", None)
    if not isinstance(marked, set):
        return
    library = {name for name in marked if name.split(".")[0] == "plax"
               or name.startswith("plax_")}
    if not library:
        return
    marked.difference_update(library)
    marked.add("plax.testing")
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(cache, dict):
        cache.clear()


def pytest_configure(config):
    library_modules_not_rewritten()
    # registered here, at start-up, not in the kit's conftest.py: modules outside the kit
    # (plax's own tests) import the specs, which mark cases ``x64``, without that conftest
    config.addinivalue_line("markers", "x64: the test runs with jax_enable_x64 turned on")
    # An explicit --plax-backend is checked at once, so that a wrong or broken backend is a
    # usage error reported before collection, with the plugin's traceback.
    if config.getoption("plax_backend", None):
        selected_backends(config)


def pytest_report_header(config):
    if not config.getoption("plax_backend", None):
        return None
    import plax
    lines = []
    for name in selected_backends(config):
        devices = plax.devices(backend=name)
        lines.append(f"plax conformance: backend {name!r} on {len(devices)} device(s): "
                     f"{', '.join(map(repr, devices))}")
    return lines


def selected_backends(config) -> list[str]:
    """The backends under test: the ``--plax-backend`` names (checked), else every installed
    backend.

    Raises:
      pytest.UsageError: a name is not an available backend; the message lists the available
        backends and, for a plugin that failed to load, its error and traceback.
    """
    cached = config.stash.get(_SELECTED, None)
    if cached is not None:
        return list(cached)
    from plax import plugins
    reg = plugins.registry()
    try:
        reg.check_environment()
    except RuntimeError as err:
        raise pytest.UsageError(f"plax conformance: {err}") from None
    names = config.getoption("plax_backend", None)
    available = sorted(reg.backends)
    if not names:
        selected = available
    else:
        selected = list(dict.fromkeys(names))  # repeated names once, in order
        for name in selected:
            if name not in reg.backends:
                raise pytest.UsageError(unavailable_backend_message(reg, name))
    config.stash[_SELECTED] = selected
    return list(selected)


def _provides(record, name: str) -> bool:
    """Whether a plugin record plausibly provides backend ``name``: its entry point is called
    that, or a component of its module path is (``NAME``, ``plax_NAME``, ``NAME_...``)."""
    if record.name == name:
        return True
    parts = re.split(r"[.:]", record.source.replace("-", "_"))
    return any(p == name or p.endswith("_" + name) or p.startswith(name + "_") for p in parts)


def unavailable_backend_message(reg, name: str) -> str:
    """Why ``--plax-backend=name`` cannot run: a plugin that failed to load (its error and
    traceback), exclusion by configuration, or no such backend; always with the available
    backends."""
    available = sorted(reg.backends)
    failed = [r for r in reg.records if r.status != "loaded"]
    mine = [r for r in failed if _provides(r, name)]
    if mine:
        head = (f"--plax-backend={name}: the plugin providing backend {name!r} is installed but "
                f"failed to load, so it cannot be tested. Available backends: {available}.")
        shown = mine
    else:
        head = f"--plax-backend={name}: {reg.unavailable(name, 'backend')}"
        if "available backends" not in head:
            head += f" Available backends: {available}."
        shown = failed
        if failed:
            head += "\nPlugins that failed to load (one of them may provide it):"
    lines = [head]
    for r in shown:
        lines.append(f"  plugin {r.name!r} ({r.group}: {r.source}): {r.error}")
        if r.traceback:
            lines.extend("    | " + ln for ln in r.traceback.rstrip("\n").splitlines())
    return "\n".join(lines)

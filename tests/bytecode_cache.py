"""Bytecode that a test session's processes compile once and share: the xdist workers and the
child interpreters use one bytecode cache (:data:`subprocess_util.PYCACHE`), and the controller
assertion-rewrites the test modules into it before the workers start.

Without this, every xdist worker parsed, assertion-rewrote and compiled each of the ~370 test
modules itself while collecting (pytest's rewriting is Python code walking every ``assert``:
about 22 CPU seconds per process, more than half of a worker's collection), and did it again on
every run where ``PYTHONDONTWRITEBYTECODE`` is set (as on the project's shared development
host), since nothing could be cached. The child interpreters of the subprocess tests already
shared a bytecode cache outside the checkout (tests/subprocess_util.py); the workers now use
the same one, so a module compiled by one process of the session (or of an earlier session,
while its source is unchanged: Python and pytest check the source's mtime and size) is loaded
by the others.
"""
from __future__ import annotations

import fnmatch
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from subprocess_util import PYCACHE

#: names of the modules pytest assertion-rewrites when it collects them
REWRITTEN_NAMES = ("test_*.py", "conftest.py")
#: pytest's default ``norecursedirs``: directories it does not collect from
SKIPPED_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
#: seconds the controller waits for its rewriting processes (~15 CPU s of work on a loaded
#: 2-core host); past that the rest is left to the workers, so a stuck or killed process (a
#: ``multiprocessing.Pool`` waits forever for the task of a worker that died) delays the
#: session by this much at worst instead of hanging it before its first test
REWRITE_TIMEOUT_S = 300


def share_bytecode_with_the_workers(environ=os.environ) -> bool:
    """Makes the processes this one starts (xdist workers, child interpreters) read and write
    their bytecode in :data:`subprocess_util.PYCACHE` (outside the checkout), even where
    ``PYTHONDONTWRITEBYTECODE`` is set.

    A ``PYTHONPYCACHEPREFIX`` the user set is left alone (and so is their
    ``PYTHONDONTWRITEBYTECODE`` then). tests/conftest.py calls this when it is loaded, before
    pytest-xdist starts its workers, which inherit the environment.

    Args:
      environ: the environment to update (``os.environ``).

    Returns:
      Whether the environment now points at the shared cache.

    Example::

      share_bytecode_with_the_workers()   # os.environ["PYTHONPYCACHEPREFIX"] == str(PYCACHE)
    """
    if environ.get("PYTHONPYCACHEPREFIX"):
        return False
    environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return True


def modules_to_rewrite(paths: Iterable[str | os.PathLike],
                       skipped_dirs: Sequence[str] = SKIPPED_DIRS) -> list[Path]:
    """The test modules and conftest.py files at or under ``paths`` (files or directories; a
    ``path::test`` node ID counts as its file; anything that is not an existing path, such as
    a ``--pyargs`` module name, is skipped), as absolute paths, sorted, each once.

    Below a directory given, those pytest does not collect are not searched either: names
    matching a pattern of ``skipped_dirs`` (pytest's ``norecursedirs``) and virtual
    environments (a ``.venv`` in the checkout holds ~950 test modules of NumPy, SciPy, JAX...).

    Example::

      modules_to_rewrite(["tests/lax", "tests/test_array.py::test_repr"])
    """
    found: set[Path] = set()
    for arg in paths:
        path = Path(os.path.abspath(str(arg).split("::")[0]))
        if path.is_file() and path.suffix == ".py":
            found.add(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not _not_collected(
                Path(root, d), skipped_dirs)]
            found.update(Path(root, f) for f in files
                         if any(fnmatch.fnmatch(f, pattern) for pattern in REWRITTEN_NAMES))
    return sorted(found)


def _not_collected(directory: Path, skipped_dirs: Sequence[str]) -> bool:
    # pytest's own rules (norecursedirs, and its virtual-environment markers)
    return (any(fnmatch.fnmatch(directory.name, pattern) for pattern in skipped_dirs)
            or (directory / "pyvenv.cfg").is_file()
            or (directory / "conda-meta" / "history").is_file())


_CONFIG = None  # the controller's pytest config, inherited by the forked rewriting processes


def _rewrite_into_cache(path: Path) -> bool:
    # what pytest's rewriting import hook does for a module without a valid cached pyc (same
    # file name and contents: the hook's own functions), without executing the module
    from _pytest.assertion.rewrite import (PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc,
                                           assertstate_key, get_cache_dir)
    state = _CONFIG.stash[assertstate_key]
    cache_dir = get_cache_dir(path)
    pyc = cache_dir / (path.name[:-3] + PYC_TAIL)
    if _read_pyc(path, pyc, state.trace) is not None:
        return False
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        stat, code = _rewrite_test(path, _CONFIG)
    except Exception:  # noqa: BLE001  (unreadable, a syntax error, ...)
        return False  # the worker's own import of the module reports it
    return _write_pyc(state, code, stat, pyc)


def _start_rewriting_process(prefix: str | None) -> None:
    sys.pycache_prefix = prefix  # where the workers' get_cache_dir will look
    sys.dont_write_bytecode = False


def rewrite_ahead(config, paths: Sequence[Path], processes: int = 2,
                  environ: Mapping[str, str] = os.environ) -> int:
    """Assertion-rewrites and compiles the test modules ``paths`` into the bytecode cache that
    processes started with ``environ`` read (its ``PYTHONPYCACHEPREFIX``: the shared one of
    :func:`share_bytecode_with_the_workers`, or a user's own) with ``processes`` forked
    processes, as pytest's import hook would while collecting them, so that the xdist workers
    load the result instead of each rewriting every module again.

    A module whose cached code is up to date is skipped. Nothing is done where ``environ``
    says not to write bytecode, where the platform cannot fork, or where pytest's assertion
    rewriting is off or its internals changed; a module that cannot be rewritten is left alone
    (the workers then rewrite as before, and report its error: only time is lost), and so is
    whatever is not done after :data:`REWRITE_TIMEOUT_S`.

    Args:
      config: the controller's pytest config (its assertion-rewriting state and settings).
      paths: the modules to rewrite (:func:`modules_to_rewrite`).
      processes: how many processes share the work.
      environ: the environment the workers start with (``os.environ``).

    Returns:
      How many modules were rewritten.

    Example::

      rewrite_ahead(config, modules_to_rewrite(config.args))
    """
    global _CONFIG
    if not paths or environ.get("PYTHONDONTWRITEBYTECODE") \
            or config.getoption("assertmode", "rewrite") != "rewrite" \
            or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    try:
        from _pytest.assertion.rewrite import assertstate_key
        config.stash[assertstate_key]
    except (ImportError, KeyError):
        return 0
    _CONFIG = config
    try:
        with multiprocessing.get_context("fork").Pool(
                processes, initializer=_start_rewriting_process,
                initargs=(environ.get("PYTHONPYCACHEPREFIX") or None,)) as pool:
            return sum(pool.map_async(_rewrite_into_cache, paths, chunksize=4).get(
                REWRITE_TIMEOUT_S))
    except Exception:  # noqa: BLE001  (a work-saving step: it never fails the session)
        return 0
    finally:
        _CONFIG = None

"""The toy backend (tests/plugin_packages/plax_toybackend) pip-installed into a site directory
once per test session, for every test that needs it installed as a user would have it.

tests/test_plugins.py and tests/test_installed_backend.py both need it, and the latter runs
test_plugins.py again in two child pytest sessions (which inherit the session's
``XDG_CACHE_HOME``, see tests/session_caches.py): each used to run its own ``pip install``
(four or five per session, about a CPU second and several wall seconds each); now the first
process to ask builds it and every other one reuses the directory.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from session_caches import build_once_per_session
from subprocess_util import REPO

TOY_PACKAGE = REPO / "tests" / "plugin_packages" / "plax_toybackend"


def _install_toy(directory: Path) -> None:
    # build from a private copy: setuptools writes build files next to the sources, and
    # parallel test processes would otherwise race on them
    source = directory / "src" / "plax_toybackend"
    shutil.copytree(TOY_PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--quiet", "--target", str(directory / "site"),
         str(source)],
        capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install failed:\n{proc.stdout}\n{proc.stderr}")


def toy_backend_site() -> Path:
    """The site directory where pip installed plax-toybackend (with its dist-info and entry
    point), built once per test session (:func:`session_caches.build_once_per_session`).

    Returns:
      The directory to put on a child interpreter's ``PYTHONPATH``; tests only read it.

    Example::

      env = {"PYTHONPATH": str(toy_backend_site())}
    """
    return build_once_per_session("toy-backend", _install_toy) / "site"

"""The test session keeps its caches (the Numba backend's compiled kernels among them) in a
temporary directory of its own, shared with its workers and children, never in the user's home
(tests/session_caches.py, called by tests/conftest.py)."""
from __future__ import annotations

import os

from session_caches import SESSION_CACHES_PREFIX, keep_caches_in_the_session
from subprocess_util import last_json, run_python


def test_this_session_caches_in_a_session_directory():
    caches = os.environ["XDG_CACHE_HOME"]
    assert os.path.basename(os.path.normpath(caches)).startswith(SESSION_CACHES_PREFIX), caches
    assert os.path.isdir(caches)


def test_a_fresh_session_gets_a_new_directory_instead_of_the_users_cache(tmp_path):
    home_cache = str(tmp_path / ".cache")
    environ = {"XDG_CACHE_HOME": home_cache}
    made = keep_caches_in_the_session(environ)
    try:
        assert made is not None and os.path.isdir(made)
        assert environ["XDG_CACHE_HOME"] == made != home_cache
        assert os.path.basename(made).startswith(SESSION_CACHES_PREFIX)
    finally:
        os.rmdir(made)
    environ = {}
    made = keep_caches_in_the_session(environ)
    try:
        assert environ["XDG_CACHE_HOME"] == made
    finally:
        os.rmdir(made)


def test_a_session_inside_a_session_keeps_the_outer_directory():
    outer = os.environ["XDG_CACHE_HOME"]
    environ = {"XDG_CACHE_HOME": outer}
    assert keep_caches_in_the_session(environ) is None
    assert environ == {"XDG_CACHE_HOME": outer}


def test_a_child_interpreter_compiles_into_the_session_cache():
    # the child drops the parent's PLAX_* variables (PLAX_NUMBA_CACHE_DIR included), so the
    # Numba backend's cache directory comes from XDG_CACHE_HOME: the session's
    out = last_json(run_python("""
        import json, os
        from plax_numba import cache
        print(json.dumps([os.environ["XDG_CACHE_HOME"], cache.cache_dir()]))
    """))
    caches = os.environ["XDG_CACHE_HOME"]
    assert out == [caches, os.path.join(caches, "plax_numba")]

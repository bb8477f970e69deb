"""The test session keeps its caches (the Numba backend's compiled kernels among them) in a
temporary directory of its own, shared with its workers and children, never in the user's home
(tests/session_caches.py, called by tests/conftest.py)."""
from __future__ import annotations

import os
import threading

import pytest

from session_caches import (SESSION_CACHES_PREFIX, build_once_per_session,
                            keep_caches_in_the_session)
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


def test_a_shared_build_runs_once_and_the_waiting_process_reuses_it(tmp_path, monkeypatch):
    # flock locks belong to open files, so two threads here stand for two xdist workers
    pytest.importorskip("fcntl")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    started, release, builds, results = threading.Event(), threading.Event(), [], []

    def build(directory):
        builds.append(directory)
        started.set()
        assert release.wait(60)
        (directory / "made").write_text("once")

    first = threading.Thread(target=lambda: results.append(build_once_per_session("b", build)))
    first.start()
    assert started.wait(60)
    second = threading.Thread(target=lambda: results.append(build_once_per_session("b", build)))
    second.start()
    second.join(0.5)
    assert second.is_alive() and results == []  # waits for the first build
    release.set()
    first.join(60)
    second.join(60)
    assert results == [tmp_path / "session-builds" / "b"] * 2 and len(builds) == 1
    assert (results[0] / "made").read_text() == "once"


def test_a_failed_shared_build_fails_the_other_processes_at_once(tmp_path, monkeypatch):
    pytest.importorskip("fcntl")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(directory):
        raise OSError("the compiler is missing")

    with pytest.raises(OSError, match="the compiler is missing"):
        build_once_per_session("b", broken)
    with pytest.raises(RuntimeError, match="failed in another process(.|\n)*compiler is missing"):
        build_once_per_session("b", lambda d: pytest.fail("built again"))


def test_waiting_for_a_shared_build_times_out_with_a_clear_error(tmp_path, monkeypatch):
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "session-builds").mkdir()
    with open(tmp_path / "session-builds" / "b.lock", "a") as other:  # a builder that hangs
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.raises(TimeoutError, match="waited 0 s for another process"):
            build_once_per_session("b", lambda d: pytest.fail("built while locked"), timeout=0.3)

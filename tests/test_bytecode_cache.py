"""The test session's processes share one bytecode cache, and the xdist controller
assertion-rewrites the test modules into it ahead of its workers (tests/bytecode_cache.py)."""
from __future__ import annotations

import multiprocessing
import os

import pytest

import bytecode_cache
from bytecode_cache import modules_to_rewrite, rewrite_ahead, share_bytecode_with_the_workers
from subprocess_util import PYCACHE

needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="the controller rewrites ahead only where it can fork")


def test_the_workers_get_the_shared_cache_even_where_bytecode_is_not_written():
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/home/u"}
    assert share_bytecode_with_the_workers(environ)
    assert environ == {"PYTHONPYCACHEPREFIX": str(PYCACHE), "HOME": "/home/u"}


def test_the_users_own_cache_prefix_is_kept():
    environ = {"PYTHONPYCACHEPREFIX": "/elsewhere", "PYTHONDONTWRITEBYTECODE": "1"}
    assert not share_bytecode_with_the_workers(environ)
    assert environ == {"PYTHONPYCACHEPREFIX": "/elsewhere", "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_modules_to_rewrite_are_the_test_modules_and_conftests(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("test_a.py", "conftest.py", "helper.py", "sub/test_b.py", "sub/data.json"):
        (tmp_path / name).write_text("")
    assert modules_to_rewrite([tmp_path, f"{tmp_path / 'helper.py'}::test_x", "plax.testing",
                               tmp_path / "sub"]) == sorted(
        [tmp_path / "test_a.py", tmp_path / "conftest.py", tmp_path / "helper.py",
         tmp_path / "sub" / "test_b.py"])


def test_directories_pytest_does_not_collect_are_not_searched(tmp_path):
    # a virtual environment in the checkout (as CI makes one) holds NumPy's, SciPy's... tests
    for venv in (".venv", "env"):
        (tmp_path / venv / "lib").mkdir(parents=True)
        (tmp_path / venv / "pyvenv.cfg").write_text("")
        (tmp_path / venv / "lib" / "test_numpy_thing.py").write_text("")
    for skipped in ("build", ".hidden", "dist"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "test_x.py").write_text("")
    (tmp_path / "test_kept.py").write_text("")
    assert modules_to_rewrite([tmp_path]) == [tmp_path / "test_kept.py"]
    # the given patterns (the session's norecursedirs) decide, and a directory named is searched
    assert modules_to_rewrite([tmp_path, tmp_path / "dist"], skipped_dirs=("build",)) == sorted(
        [tmp_path / ".hidden" / "test_x.py", tmp_path / "dist" / "test_x.py",
         tmp_path / "test_kept.py"])


def _rewriting(pytestconfig):
    if pytestconfig.getoption("assertmode") != "rewrite":
        pytest.skip("pytest's assertion rewriting is off (--assert=plain)")


@needs_fork
def test_a_module_rewritten_ahead_is_what_pytests_import_hook_loads(tmp_path, pytestconfig):
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc
    _rewriting(pytestconfig)
    module = tmp_path / "test_rewritten_ahead.py"
    module.write_text("def test_it():\n    x = [1, 2]\n    assert len(x) == 3\n")
    # the workers' environment: where they look for the module's code
    environ = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    cached = tmp_path.joinpath("pycache", *module.parent.parts[1:], "test_rewritten_ahead" + PYC_TAIL)
    assert rewrite_ahead(pytestconfig, [module], environ=environ) == 1
    code = _read_pyc(module, cached)
    assert code is not None, f"nothing valid at {cached}"
    namespace: dict = {}
    exec(code, namespace)
    with pytest.raises(AssertionError) as failed:
        namespace["test_it"]()
    # the assertion was rewritten: its message explains the values
    assert "assert 2 == 3" in str(failed.value), str(failed.value)
    assert rewrite_ahead(pytestconfig, [module], environ=environ) == 0  # up to date: left alone
    module.write_text("def test_it():\n    assert 1 + 1 == 2\n\n")
    assert rewrite_ahead(pytestconfig, [module], environ=environ) == 1  # changed: rewritten
    exec(_read_pyc(module, cached), namespace)
    namespace["test_it"]()


@needs_fork
def test_workers_told_not_to_write_bytecode_get_none(tmp_path, pytestconfig):
    _rewriting(pytestconfig)
    module = tmp_path / "test_fine.py"
    module.write_text("def test_it():\n    assert True\n")
    environ = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "PYTHONDONTWRITEBYTECODE": "1"}
    assert rewrite_ahead(pytestconfig, [module], environ=environ) == 0
    assert not (tmp_path / "pycache").exists()


@needs_fork
def test_a_module_that_cannot_be_rewritten_is_left_to_the_workers(tmp_path, pytestconfig):
    _rewriting(pytestconfig)
    broken = tmp_path / "test_broken_syntax.py"
    broken.write_text("def test_it(:\n    pass\n")
    good = tmp_path / "test_fine.py"
    good.write_text("def test_it():\n    assert True\n")
    # the error is the worker's to report, when it imports the module; the rest is rewritten
    assert rewrite_ahead(pytestconfig, [broken, good],
                         environ={"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}) == 1


def _die(path):
    os._exit(1)  # a rewriting process killed (out of memory, a signal) while it holds a task


@needs_fork
def test_a_rewriting_process_that_dies_does_not_hang_the_session(tmp_path, pytestconfig,
                                                                   monkeypatch):
    _rewriting(pytestconfig)
    module = tmp_path / "test_fine.py"
    module.write_text("def test_it():\n    assert True\n")
    # a multiprocessing.Pool never finishes a task whose process died: only the wait is bounded
    monkeypatch.setattr(bytecode_cache, "_rewrite_into_cache", _die)
    monkeypatch.setattr(bytecode_cache, "REWRITE_TIMEOUT_S", 1)
    assert rewrite_ahead(pytestconfig, [module],
                         environ={"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}) == 0

"""The test session's processes share one bytecode cache, and the xdist controller
assertion-rewrites the test modules into it ahead of its workers (tests/bytecode_cache.py)."""
from __future__ import annotations

import multiprocessing

import pytest

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


@needs_fork
def test_a_module_rewritten_ahead_is_what_pytests_import_hook_loads(tmp_path, pytestconfig):
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc
    if pytestconfig.getoption("assertmode") != "rewrite":
        pytest.skip("pytest's assertion rewriting is off (--assert=plain)")
    module = tmp_path / "test_rewritten_ahead.py"
    module.write_text("def test_it():\n    x = [1, 2]\n    assert len(x) == 3\n")
    # where a worker (started with PYTHONPYCACHEPREFIX=PYCACHE) looks for the module's code
    cached = PYCACHE.joinpath(*module.parent.parts[1:], "test_rewritten_ahead" + PYC_TAIL)
    try:
        assert rewrite_ahead(pytestconfig, [module]) == 1
        code = _read_pyc(module, cached)
        assert code is not None, f"nothing valid at {cached}"
        namespace: dict = {}
        exec(code, namespace)
        with pytest.raises(AssertionError) as failed:
            namespace["test_it"]()
        # the assertion was rewritten: its message explains the values
        assert "assert 2 == 3" in str(failed.value), str(failed.value)
        assert rewrite_ahead(pytestconfig, [module]) == 0  # up to date: left alone
        module.write_text("def test_it():\n    assert 1 + 1 == 2\n\n")
        assert rewrite_ahead(pytestconfig, [module]) == 1  # the source changed: rewritten
        exec(_read_pyc(module, cached), namespace)
        namespace["test_it"]()
    finally:
        cached.unlink(missing_ok=True)


@needs_fork
def test_a_module_that_cannot_be_rewritten_is_left_to_the_workers(tmp_path, pytestconfig):
    broken = tmp_path / "test_broken_syntax.py"
    broken.write_text("def test_it(:\n    pass\n")
    good = tmp_path / "test_fine.py"
    good.write_text("def test_it():\n    assert True\n")
    try:
        # the error is the worker's to report, when it imports the module; the rest is rewritten
        assert rewrite_ahead(pytestconfig, [broken, good]) == 1
    finally:
        for module in (broken, good):
            for cached in PYCACHE.joinpath(*module.parent.parts[1:]).glob(module.stem + ".*"):
                cached.unlink()

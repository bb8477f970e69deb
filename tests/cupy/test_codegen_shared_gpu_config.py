"""``tests/conftest.py``'s set-up for a GPU machine (issue 24, item 7): parallel test workers
share the card instead of starving each other, and the user's settings win."""
from __future__ import annotations

import importlib.util
import os


def _tests_conftest():
    """``tests/conftest.py`` as a module of its own (``conftest`` here is tests/cupy's); loading
    it again only repeats its idempotent set-up."""
    path = os.path.join(os.path.dirname(__file__), "..", "conftest.py")
    spec = importlib.util.spec_from_file_location("plax_tests_root_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


share_the_gpu_between_workers = _tests_conftest().share_the_gpu_between_workers


def test_each_worker_gets_a_share_of_the_pool_and_jax_does_not_preallocate():
    env = {"PYTEST_XDIST_WORKER_COUNT": "4"}
    share_the_gpu_between_workers(env)
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert float(env["PLAX_GPU_MEMORY_FRACTION"]) == 0.2
    # plax reads JAX_PLATFORMS as well: it is never left set (the GPU stays visible to plax)
    assert "JAX_PLATFORMS" not in env


def test_one_process_takes_most_of_the_card_and_user_settings_win():
    env = {}
    share_the_gpu_between_workers(env)
    assert float(env["PLAX_GPU_MEMORY_FRACTION"]) == 0.8
    mine = {"PYTEST_XDIST_WORKER_COUNT": "8", "PLAX_GPU_MEMORY_FRACTION": "0.5",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "true", "JAX_PLATFORMS": "cuda"}
    env = dict(mine)
    share_the_gpu_between_workers(env)
    assert env == mine


def test_this_session_was_configured():
    """The variables are in this process's environment (set when pytest loaded conftest.py)."""
    assert os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
    assert 0 < float(os.environ["PLAX_GPU_MEMORY_FRACTION"]) <= 1

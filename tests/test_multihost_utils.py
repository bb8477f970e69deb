"""plax.experimental.multihost_utils in one process (the run's only process): each helper
behaves as over a run of one process. Across two processes: plugins/plax_pmap/tests/
mpi_checks.py (under mpiexec)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import multihost_utils as mu


def test_process_allgather_stacks_or_concatenates():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = mu.process_allgather({"a": jnp.asarray(x), "b": 2.0})
    assert isinstance(out["a"], np.ndarray) and out["a"].shape == (1, 2, 3)
    np.testing.assert_array_equal(out["a"][0], x)
    assert out["b"].tolist() == [2.0]
    np.testing.assert_array_equal(mu.process_allgather(x, tiled=True), x)
    with pytest.raises(ValueError, match="rank >= 1"):
        mu.process_allgather(1.0, tiled=True)


def test_broadcast_sync_and_assert_equal():
    np.testing.assert_array_equal(mu.broadcast_one_to_all([jnp.arange(3)])[0], np.arange(3))
    with pytest.raises(ValueError, match="exactly one process"):
        mu.broadcast_one_to_all(1.0, is_source=False)
    mu.sync_global_devices("start")
    mu.assert_equal({"w": jnp.ones(2), "n": np.nan}, "params")


def test_reachable_as_an_attribute():
    assert plax.experimental.multihost_utils is mu
    assert "multihost_utils" in dir(plax.experimental)

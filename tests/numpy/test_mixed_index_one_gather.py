"""An index mixing static slices (and ints) with integer arrays reads with one ``gather``, as
JAX 0.10.2 stages it (issue 25): unit-step slices become the gather's window (their starts
one more index column), other steps gather ``start + step * iota`` (reversed after for a
negative step). Values against NumPy on every CPU backend, gradients against finite
differences, ``vmap`` against a loop; the jaxprs are compared with JAX's in
``test_staging_as_jax.py`` (cases ``index_*``).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import plugins
from plax.test_util import check_grads

CPU_BACKENDS = sorted(name for name, b in plugins.registry().backends.items()
                      if b.platform == "cpu")
I = np.array([0, -2, 3], np.int32)
J = np.array([[1], [3]], np.int32)

INDICES = [np.s_[1:3, I], np.s_[:, I, 2], np.s_[I, ::2], np.s_[I, 1:3, I], np.s_[:, I, 1:],
           np.s_[::-1, I], np.s_[1:3, I, None], np.s_[..., I], np.s_[1:, :, I],
           np.s_[::-2, I, 5:0:-2], np.s_[None, 2:0:-1, I, -1], np.s_[I, None, ::3, I],
           np.s_[3:1, I], np.s_[J, 1:4, I], np.s_[1:3, J, I], np.s_[-7:2, I]]


def _ids():
    return [str(k) for k in range(len(INDICES))]


@pytest.fixture
def compiled_at_once(monkeypatch):
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")


def test_one_gather_and_no_slice():
    x = np.ones((4, 5, 6), np.float32)
    for index in (np.s_[1:3, I], np.s_[I, ::2], np.s_[::-1, I], np.s_[I, 1:3, I]):
        eqns = plax.make_jaxpr(lambda x: x[index])(x).jaxpr.eqns
        names = [e.primitive.name for e in eqns]
        assert names.count("gather") == 1 and "slice" not in names, names


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_values_against_numpy_every_backend(backend, compiled_at_once):
    x = np.arange(120.0, dtype=np.float32).reshape(4, 5, 6)
    device = plax.devices(backend=backend)[0]
    for index in INDICES:
        want = x[index]
        with plax.default_device(device):
            eager = plax.device_put(x, device)[index]
        jitted = plax.jit(lambda x: (x + 1)[index], backend=backend)(x)
        assert eager.shape == want.shape, index
        np.testing.assert_array_equal(np.asarray(eager), want, err_msg=str(index))
        np.testing.assert_array_equal(np.asarray(jitted), want + 1, err_msg=str(index))


@pytest.mark.parametrize("index", [np.s_[1:3, I], np.s_[I, ::-2], np.s_[I, 1:3, I]],
                         ids=["slice_array", "array_negative_step", "array_slice_array"])
def test_gradients_against_finite_differences(index):
    x = np.random.default_rng(0).standard_normal((4, 5, 6))
    with plax.enable_x64():
        check_grads(lambda x: jnp.sin(x[index]), (x,), order=1, modes=("fwd", "rev"))


def test_gradient_counts_repeated_positions():
    x = np.zeros((4, 5), np.float32)
    g = plax.grad(lambda x: jnp.sum(x[1:, np.array([0, 0, 3])]))(x)
    want = np.zeros((4, 5))
    want[1:, 0], want[1:, 3] = 2, 1
    np.testing.assert_array_equal(np.asarray(g), want)


def test_vmap_against_a_loop():
    xs = np.arange(240.0, dtype=np.float32).reshape(2, 4, 5, 6)
    for index in (np.s_[1:3, I], np.s_[I, ::2], np.s_[::-1, I, 2]):
        got = plax.vmap(lambda x: x[index])(xs)
        np.testing.assert_array_equal(np.asarray(got), np.stack([x[index] for x in xs]))
    idx = np.array([[0, 1], [4, 2]], np.int32)
    got = plax.vmap(lambda x, i: x[1:3, i])(xs, idx)
    np.testing.assert_array_equal(np.asarray(got), np.stack([x[1:3, i] for x, i in zip(xs, idx)]))

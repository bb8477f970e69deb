"""``reshape`` with ``dimensions`` and the ``split`` primitive, as in JAX 0.10.2 (issue 25).

``lax.reshape(x, new_sizes, dimensions)`` binds one ``reshape`` equation carrying the
transposition (``jnp.stack(array, axis=1)``, ``column_stack`` of an array stage it), and
``lax.split``/``jnp.split``/``array_split``/``[hvd]split`` bind one ``split`` equation. Values
against NumPy float64 on every CPU backend (eager and compiled), gradients against finite
differences, ``vmap`` against a Python loop, errors as JAX raises them. Jaxpr texts are in
``tests/staging_cases.py`` (compared with JAX's in ``test_staging_as_jax.py``).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, plugins
from plax.test_util import check_grads

CPU_BACKENDS = sorted(name for name, b in plugins.registry().backends.items()
                      if b.platform == "cpu")
R = np.random.default_rng(33)

#: (operand shape, new sizes, dimensions)
RESHAPES = [((2, 3), (6,), (1, 0)), ((2, 3, 4), (4, 6), (2, 0, 1)), ((2, 3), (3, 2, 1), (1, 0)),
            ((2, 3, 1), (3, 2), (1, 0, 2)), ((1, 1), (), (1, 0)), ((0, 3), (3, 0), (1, 0))]

#: (operand shape, sizes, axis)
SPLITS = [((6,), (2, 4), 0), ((2, 5), (1, 0, 4), 1), ((3, 2, 2), (1, 2), -3), ((2, 3), (3,), 1),
          ((2, 0), (), 1)]


def _reshape_ref(x, new_sizes, dimensions):
    return np.transpose(x, dimensions).reshape(new_sizes)


def _split_ref(x, sizes, axis):
    starts = np.cumsum((0,) + tuple(sizes))
    axis %= x.ndim
    return [x[(slice(None),) * axis + (slice(a, a + n),)] for a, n in zip(starts, sizes)]


@pytest.fixture
def compiled_at_once(monkeypatch):
    """The Numba backend compiles before the first call (else that call may run its
    reference tier while the kernel compiles)."""
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")


# ------------------------------------------------------------------ values on every backend

@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_reshape_with_dimensions_values_every_backend(backend, compiled_at_once):
    device = plax.devices(backend=backend)[0]
    for shape, new, dims in RESHAPES:
        x = R.standard_normal(shape).astype(np.float32)
        want = _reshape_ref(x.astype(np.float64) * 2, new, dims)
        with plax.default_device(device):
            eager = lax.reshape(plax.device_put(x, device) * 2, new, dims)
        # a computed operand, so the compiled program reshapes a value it made
        jitted = plax.jit(lambda x: lax.reshape(x * 2, new, dims), backend=backend)(x)
        for got in (eager, jitted):
            assert got.shape == new
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_split_values_every_backend(backend, compiled_at_once):
    device = plax.devices(backend=backend)[0]
    for shape, sizes, axis in SPLITS:
        x = R.standard_normal(shape).astype(np.float32)
        want = _split_ref(x.astype(np.float64) + 1, sizes, axis)
        with plax.default_device(device):
            eager = lax.split(plax.device_put(x, device) + 1, sizes, axis)
        jitted = plax.jit(lambda x: lax.split(x + 1, sizes, axis), backend=backend)(x)
        for got in (eager, jitted):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-6)


def test_stacking_and_splitting_functions_against_numpy():
    m = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(np.asarray(jnp.stack(m, axis=axis)), np.stack(m, axis=axis))
    np.testing.assert_array_equal(np.asarray(jnp.column_stack(m)), np.column_stack(m))
    np.testing.assert_array_equal(np.asarray(jnp.hstack(m)), np.hstack(m))
    cube = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    for fn, arg, how in [("split", m, 2), ("split", m, [1, 3]), ("array_split", m, 3),
                         ("hsplit", m, 3), ("vsplit", m, [1]), ("dsplit", cube, 2),
                         ("hsplit", np.arange(6.0, dtype=np.float32), 3)]:
        got, want = getattr(jnp, fn)(arg, how), getattr(np, fn)(arg, how)
        assert len(got) == len(want), fn
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=f"{fn} {how}")
    np.testing.assert_array_equal(np.asarray(jnp.array_split(m, 4, axis=1)[3]),
                                  np.array_split(m, 4, axis=1)[3])


# ------------------------------------------------------------------ gradients, vmap

def test_gradients_against_finite_differences():
    x = R.standard_normal((2, 3, 4))
    with plax.enable_x64():
        check_grads(lambda x: jnp.sin(lax.reshape(x, (4, 6), (2, 0, 1))), (x,), order=2,
                    modes=("fwd", "rev"))
        check_grads(lambda x: [jnp.sin(p) for p in lax.split(x, (1, 0, 3), axis=2)], (x,),
                    order=2, modes=("fwd", "rev"))


def test_gradient_of_an_unused_piece_is_zero():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    g = plax.grad(lambda x: jnp.sum(lax.split(x, (1, 2), axis=1)[1] ** 2))(x)
    want = 2 * x.astype(np.float64)
    want[:, 0] = 0
    np.testing.assert_allclose(np.asarray(g, np.float64), want)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_against_a_loop(in_axis):
    xs = R.standard_normal((2, 3, 4)).astype(np.float32)
    rows = [np.take(xs, i, axis=in_axis) for i in range(xs.shape[in_axis])]
    got = plax.vmap(lambda x: lax.reshape(x, (x.size,), (1, 0)), in_axes=in_axis)(xs)
    np.testing.assert_array_equal(np.asarray(got), np.stack([r.T.reshape(-1) for r in rows]))
    for axis in (0, 1):
        parts = plax.vmap(lambda x: lax.split(x, (1, x.shape[axis] - 1), axis),
                          in_axes=in_axis)(xs)
        for k, part in enumerate(parts):
            want = np.stack([_split_ref(r, (1, r.shape[axis] - 1), axis)[k] for r in rows])
            np.testing.assert_array_equal(np.asarray(part), want)


# ------------------------------------------------------------------ errors (JAX's)

def test_reshape_errors_as_jax():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"permutation of operand dimensions, got dimensions "
                                        r"\(0, 0\) for shape \(2, 3\)"):
        lax.reshape(x, (3, 2), (0, 0))
    with pytest.raises(TypeError, match=r"dimensions \(0,\) for shape \(2, 3\)"):
        lax.reshape(x, (3, 2), (0,))


def test_split_errors_as_jax():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"Sum of sizes 2 must be equal to dimension 1 of the "
                                         r"operand shape \[2, 3\]"):
        lax.split(x, (1, 1), 1)
    with pytest.raises(ValueError, match=r"Sizes passed to split must be nonnegative, got "
                                         r"\[-1, 4\]"):
        lax.split(x, (-1, 4), 1)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        lax.split(x, (1, 2), 2)
    # jnp: indices out of order or range are negative sizes (JAX refuses what NumPy clamps)
    with pytest.raises(ValueError, match="nonnegative"):
        jnp.split(np.arange(6.0), [4, 2])
    with pytest.raises(ValueError, match="equal division: rest is 2"):
        jnp.split(np.arange(6.0), 4)
    with pytest.raises(ZeroDivisionError):
        jnp.split(np.arange(6.0), 0)


def test_errors_are_the_ones_jax_raises():
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    x = np.ones((2, 3), np.float32)
    calls = [lambda L, N: L.reshape(x, (3, 2), (0, 0)), lambda L, N: L.split(x, (1, 1), 1),
             lambda L, N: L.split(x, (-1, 4), 1), lambda L, N: L.split(x, (1, 2), 2),
             lambda L, N: N.split(np.arange(6.0), [4, 2]), lambda L, N: N.split(np.arange(6.0), 4),
             lambda L, N: N.split(np.arange(6.0), 0)]
    for call in calls:
        with pytest.raises(Exception) as theirs:
            call(jax.lax, jax.numpy)
        with pytest.raises(type(theirs.value)) as ours:
            call(lax, jnp)
        assert str(ours.value) == str(theirs.value)

"""plax.nn.initializers: outputs against JAX's recorded bytes, shapes, dtypes, variance
statistics, orthogonality, jit/vmap and JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random
from plax.nn import initializers as init

import nn_cases

_CASES = nn_cases.answers()["initializers"]
# Initializers whose draws go through random.normal / truncated_normal (an inverse erf) or
# a QR factorisation: plax.random.normal itself differs from JAX's by a few ulp, so these
# are compared to a tolerance; every other initializer must equal JAX bit for bit.
_NOT_BITWISE = ("normal", "truncated_normal", "glorot_normal", "xavier_normal", "lecun_normal",
                "he_normal", "kaiming_normal", "orthogonal", "delta_orthogonal")


def _not_bitwise(case) -> bool:
    if case["name"] == "variance_scaling":
        return case["kwargs"]["distribution"] != "uniform"
    return case["name"] in _NOT_BITWISE and case["dtype"] != "bfloat16"


def _case_id(case) -> str:
    return f"{case['name']}-{case['kwargs']}-{case['dtype']}-{case['shape']}"


@pytest.mark.parametrize("case", _CASES, ids=[_case_id(c) for c in _CASES])
def test_outputs_equal_jax(case):
    with plax.config.override("jax_enable_x64", case["x64"]), \
            plax.config.override("jax_threefry_partitionable", case["partitionable"]):
        initializer = nn_cases.make_initializer(init, case)
        key = random.key(case["seed"]) if case["typed_key"] else random.PRNGKey(case["seed"])
        args = (key, tuple(case["shape"])) + ((case["dtype"],) if case["dtype"] else ())
        got = np.asarray(initializer(*args))
    assert str(got.dtype) == case["result_dtype"]
    assert list(got.shape) == case["result_shape"]
    want = np.frombuffer(bytes.fromhex(case["hex"]), dtype=got.dtype).reshape(got.shape)
    if not _not_bitwise(case):
        assert nn_cases.bit_hex(got) == case["hex"], "not bit-identical to JAX"
        return
    rtol = {"float16": 1e-2, "float32": 2e-6, "complex64": 2e-6}.get(case["result_dtype"], 1e-13)
    if case["name"] in ("orthogonal", "delta_orthogonal"):
        rtol = 1e-12 if case["x64"] else 1e-5
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("factory,scale,mode,bounded", [
    (init.glorot_uniform, 1.0, "fan_avg", "uniform"),
    (init.glorot_normal, 1.0, "fan_avg", "truncated"),
    (init.lecun_uniform, 1.0, "fan_in", "uniform"),
    (init.lecun_normal, 1.0, "fan_in", "truncated"),
    (init.he_uniform, 2.0, "fan_in", "uniform"),
    (init.he_normal, 2.0, "fan_in", "truncated"),
])
def test_presets_have_the_variance_they_promise(factory, scale, mode, bounded):
    shape = (3, 200, 150)                 # receptive field 3: fan_in 600, fan_out 450
    fan_in, fan_out = 600, 450
    n = {"fan_in": fan_in, "fan_avg": (fan_in + fan_out) / 2}[mode]
    w = np.asarray(factory()(random.PRNGKey(0), shape))
    assert w.shape == shape and w.dtype == np.float32
    assert abs(w.mean()) < 0.01 * np.sqrt(scale / n) * 10
    np.testing.assert_allclose(w.var(), scale / n, rtol=0.03)
    limit = np.sqrt(3 * scale / n) if bounded == "uniform" else 2 * np.sqrt(scale / n) / .8796
    assert np.abs(w).max() <= limit * (1 + 1e-6)


@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg", "fan_geo_avg"])
@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "uniform"])
def test_variance_scaling_modes_and_distributions(mode, distribution):
    shape = (300, 100)
    n = {"fan_in": 300, "fan_out": 100, "fan_avg": 200, "fan_geo_avg": np.sqrt(300 * 100)}[mode]
    w = np.asarray(init.variance_scaling(0.5, mode, distribution)(random.PRNGKey(1), shape))
    np.testing.assert_allclose(w.var(), 0.5 / n, rtol=0.05)


def test_axes_define_the_fans():
    # in_axis 0 (size 4) and out_axis (1, 2) (size 30), batch axis 3 left out: fan_in 4
    w = np.asarray(init.variance_scaling(1.0, "fan_in", "normal", in_axis=0, out_axis=(1, 2),
                                         batch_axis=3)(random.PRNGKey(2), (4, 5, 6, 300)))
    np.testing.assert_allclose(w.var(), 1 / 4, rtol=0.05)


def test_complex_variance_scaling():
    for dist in ("truncated_normal", "normal", "uniform"):
        w = np.asarray(init.variance_scaling(1.0, "fan_in", dist)(random.PRNGKey(3), (200, 100),
                                                                  jnp.complex64))
        assert w.dtype == np.complex64
        np.testing.assert_allclose(np.mean(np.abs(w) ** 2), 1 / 200, rtol=0.05)


def test_simple_initializers():
    key = random.PRNGKey(0)
    np.testing.assert_array_equal(init.zeros(key, (2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(init.ones(key, (2,), jnp.int32), np.ones(2, np.int32))
    np.testing.assert_array_equal(init.constant(3.5)(key, (2,)), [3.5, 3.5])
    assert init.constant(1, dtype=jnp.float16)(key, (2,)).dtype == np.float16
    u = np.asarray(init.uniform(4.0)(key, (1000,)))
    assert u.min() >= 0 and u.max() < 4 and abs(u.mean() - 2) < 0.2
    n = np.asarray(init.normal(3.0)(key, (5000,)))
    np.testing.assert_allclose(n.std(), 3.0, rtol=0.05)
    t = np.asarray(init.truncated_normal(3.0)(key, (5000,)))
    assert np.abs(t).max() <= 6.0
    with plax.config.override("jax_enable_x64", True):
        assert init.normal()(key, (2,)).dtype == np.float64
        assert init.zeros(key, (2,)).dtype == np.float64
    assert init.normal(dtype=jnp.bfloat16)(key, (2,)).dtype == jnp.bfloat16
    assert isinstance(init.glorot_normal(), init.Initializer)


def test_orthogonal_and_delta_orthogonal():
    key = random.PRNGKey(4)
    for shape in [(5, 5), (3, 7), (7, 3)]:
        w = np.asarray(init.orthogonal(scale=2.0)(key, shape), np.float64)
        small = min(shape)
        gram = w @ w.T if shape[0] == small else w.T @ w
        np.testing.assert_allclose(gram, 4 * np.eye(small), atol=1e-5)
    w = np.asarray(init.orthogonal(column_axis=0)(key, (4, 2, 3)), np.float64)
    m = w.reshape(4, 6)                    # columns along axis 0: the 6 rows x 4 columns
    np.testing.assert_allclose(m @ m.T, np.eye(4), atol=1e-5)
    np.testing.assert_array_equal(init.orthogonal()(key, (0, 3)), np.zeros((0, 3)))
    d = np.asarray(init.delta_orthogonal()(key, (3, 3, 2, 4)), np.float64)
    centre = d[1, 1]
    np.testing.assert_allclose(centre @ centre.T, np.eye(2), atol=1e-5)
    d[1, 1] = 0
    assert not d.any()


def test_jit_and_vmap_over_keys():
    f = init.glorot_uniform()
    keys = random.split(random.PRNGKey(5), 3)
    eager = np.stack([np.asarray(f(k, (4, 3))) for k in keys])
    np.testing.assert_array_equal(plax.vmap(lambda k: f(k, (4, 3)))(keys), eager)
    np.testing.assert_array_equal(plax.jit(f, static_argnums=1)(keys[0], (4, 3)), eager[0])
    g = init.he_normal()
    np.testing.assert_allclose(plax.jit(g, static_argnums=1)(keys[1], (4, 3)),
                               g(keys[1], (4, 3)), rtol=1e-6)


def test_bad_input_like_jax():
    key = random.PRNGKey(0)
    with pytest.raises(ValueError, match="invalid mode"):
        init.variance_scaling(1.0, "fan_sum", "normal")(key, (2, 2))
    with pytest.raises(ValueError, match="invalid distribution"):
        init.variance_scaling(1.0, "fan_in", "cauchy")(key, (2, 2))
    with pytest.raises(ValueError, match="Can't compute input and output sizes"):
        init.glorot_normal()(key, (5,))
    assert init.lecun_normal(in_axis=0, out_axis=0)(key, (5,)).shape == (5,)
    with pytest.raises(ValueError, match="at least a 2D shape"):
        init.orthogonal()(key, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(key, (3, 3))
    with pytest.raises(ValueError, match="fan_in"):
        init.delta_orthogonal()(key, (3, 4, 2))

"""``conv_general_dilated`` honours ``precision=`` and ``jax_default_matmul_precision`` as
``dot_general`` does: recorded on the equation as JAX canonicalises the option (beside JAX
where installed), part of ``jit``'s cache key, and CPU values unchanged (as XLA's CPU backend).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

# the option's settings and how JAX canonicalises each: the table dot_general's tests use
from test_config_matmul_precision import _EXPECTED, _SETTINGS  # noqa: E402


def _conv(lx):
    return lambda x, w: lx.conv_general_dilated(x, w, (1,), "SAME")


def _names(p):
    if p is None:
        return None
    return tuple(str(x).rsplit(".", 1)[-1] for x in p) if isinstance(p, tuple) else \
        str(p).rsplit(".", 1)[-1]


def _recorded(jx, lx, np_, setting):
    with jx.default_matmul_precision(setting):
        closed = jx.make_jaxpr(_conv(lx))(np_.ones((1, 1, 5)), np_.ones((1, 1, 3)))
    (eqn,) = closed.jaxpr.eqns
    return _names(eqn.params["precision"])


@pytest.mark.parametrize("setting", _SETTINGS)
def test_default_precision_is_recorded_on_the_convolution(setting):
    assert _recorded(plax, lax, jnp, setting) == _EXPECTED[setting]


@pytest.mark.parametrize("setting", _SETTINGS)
def test_recorded_as_jax_records_it(setting):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    assert _recorded(jax, jax.lax, jax.numpy, setting) == _recorded(plax, lax, jnp, setting)


def test_recorded_as_dot_general_records_it():
    # one canonical form for every product: an explicit precision wins over the option
    x, w = jnp.ones((1, 1, 5)), jnp.ones((1, 1, 3))
    for precision in (None, "highest", lax.Precision.HIGH, (lax.Precision.HIGH, "highest")):
        with plax.default_matmul_precision("bfloat16"):
            conv = plax.make_jaxpr(lambda x, w: lax.conv_general_dilated(
                x, w, (1,), "SAME", precision=precision))(x, w)
            dot = plax.make_jaxpr(lambda a: lax.dot(a, a, precision=precision))(jnp.ones((2, 2)))
        assert conv.jaxpr.eqns[0].params["precision"] == dot.jaxpr.eqns[0].params["precision"]
    plain = plax.make_jaxpr(_conv(lax))(x, w)
    assert plain.jaxpr.eqns[0].params["precision"] is None


def test_gradient_convolutions_carry_the_precision():
    x, w = jnp.ones((1, 1, 5)), jnp.ones((1, 1, 3))
    with plax.default_matmul_precision("float32"):
        closed = plax.make_jaxpr(plax.grad(lambda x, w: _conv(lax)(x, w).sum(), (0, 1)))(x, w)
    convs = [e for e in closed.jaxpr.eqns if e.primitive.name == "conv_general_dilated"]
    assert len(convs) == 3
    assert all(e.params["precision"] == ("HIGHEST", "HIGHEST") for e in convs)


def test_jit_traces_again_when_the_option_changes():
    traces = []

    def f(x, w):
        traces.append(1)
        return _conv(lax)(x, w)
    g = plax.jit(f)
    x, w = jnp.ones((1, 1, 5)), jnp.ones((1, 1, 3))
    g(x, w)
    g(x, w)
    assert len(traces) == 1
    with plax.default_matmul_precision("tensorfloat32"):
        g(x, w)
        assert len(traces) == 2
        assert "precision=('HIGH', 'HIGH')" in str(plax.make_jaxpr(g)(x, w))
    g(x, w)
    assert len(traces) == 2  # the first entry again


@pytest.mark.parametrize("setting", ["bfloat16", "tensorfloat32", "BF16_BF16_F32"])
def test_cpu_values_unchanged(setting, backend_name):
    if plax.devices()[0].platform != "cpu":
        pytest.skip("the CPU backends' behaviour")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 17)).astype(np.float32)
    w = rng.standard_normal((4, 3, 5)).astype(np.float32)
    f = plax.jit(_conv(lax), backend=backend_name)
    plain = np.asarray(f(x, w))
    with plax.default_matmul_precision(setting):
        reduced = np.asarray(f(x, w))
        eager = np.asarray(_conv(lax)(x, w))
    np.testing.assert_array_equal(reduced, plain)
    np.testing.assert_array_equal(eager, plain)
    # the float64 reference: a cross-correlation with SAME padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (2, 2)))
    ref = np.stack([np.einsum("bci,oci->bo", xp[:, :, k:k + 5], w.astype(np.float64))
                    for k in range(17)], axis=-1)
    np.testing.assert_allclose(plain, ref, rtol=1e-5, atol=1e-5)

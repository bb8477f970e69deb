"""plax.nn activations: values against NumPy float64, gradients against finite differences and
against JAX's recorded answers (the kinks included), jit, vmap, result dtypes."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import nn

import nn_cases

_erfc = np.vectorize(math.erfc)


def _np_softplus(x):
    return np.logaddexp(x, 0)


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_elu(x, a=1.0):
    return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


def _np_relu6(x):
    return np.clip(x, 0, 6)


SELU_A, SELU_L = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# name -> (plax function, NumPy float64 reference)
REFERENCES = {
    "identity": (nn.identity, lambda x: x),
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, _np_relu6),
    "sigmoid": (nn.sigmoid, _np_sigmoid),
    "sparse_sigmoid": (nn.sparse_sigmoid, lambda x: np.clip((x + 1) / 2, 0, 1)),
    "softplus": (nn.softplus, _np_softplus),
    "sparse_plus": (nn.sparse_plus,
                    lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    "soft_sign": (nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    "silu": (nn.silu, lambda x: x * _np_sigmoid(x)),
    "mish": (nn.mish, lambda x: x * np.tanh(_np_softplus(x))),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -_np_softplus(-x)),
    "elu": (nn.elu, _np_elu),
    "elu_alpha": (lambda x: nn.elu(x, 0.3), lambda x: _np_elu(x, 0.3)),
    "selu": (nn.selu, lambda x: SELU_L * _np_elu(x, SELU_A)),
    "celu": (lambda x: nn.celu(x, 1.5),
             lambda x: np.maximum(x, 0) + 1.5 * np.expm1(np.minimum(x, 0) / 1.5)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: _np_relu6(x + 3) / 6),
    "hard_silu": (nn.hard_silu, lambda x: x * _np_relu6(x + 3) / 6),
    "gelu_tanh": (nn.gelu, lambda x: x / 2 * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                         * (x + 0.044715 * x ** 3)))),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False),
                   lambda x: x / 2 * _erfc(-x / np.sqrt(2))),
    "squareplus": (nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    "log1mexp": (lambda x: nn.log1mexp(jnp.abs(x) + 0.01),
                 lambda x: np.log(-np.expm1(-(np.abs(x) + 0.01)))),
    "tanh": (nn.tanh, np.tanh),
}
SHAPES = [(), (7,), (3, 4), (2, 3, 4)]


def _x(shape, seed=0):
    return 3 * np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_values_against_numpy_float32(name):
    fn, ref = REFERENCES[name]
    for i, shape in enumerate(SHAPES):
        x = _x(shape, i).astype(np.float32)
        got = fn(jnp.asarray(x))
        assert got.dtype == np.float32 and got.shape == shape
        np.testing.assert_allclose(np.asarray(got), ref(x.astype(np.float64)), rtol=2e-5,
                                   atol=2e-6, err_msg=name)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_values_against_numpy_float64(name):
    fn, ref = REFERENCES[name]
    with plax.config.override("jax_enable_x64", True):
        for i, shape in enumerate(SHAPES[1:3]):
            x = _x(shape, i)
            got = fn(jnp.asarray(x))
            assert got.dtype == np.float64
            np.testing.assert_allclose(np.asarray(got), ref(x), rtol=1e-12, atol=1e-14,
                                       err_msg=name)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "gelu_tanh", "softplus", "elu", "hard_silu"])
def test_half_precision_keeps_its_dtype(name):
    fn, ref = REFERENCES[name]
    x = _x((8,)).astype(np.float16)
    got = fn(jnp.asarray(x))
    assert got.dtype == np.float16
    np.testing.assert_allclose(np.asarray(got, np.float64), ref(x.astype(np.float64)),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_gradient_against_finite_differences(name):
    fn, ref = REFERENCES[name]
    with plax.config.override("jax_enable_x64", True):
        x = _x((9,), 3)
        x = x[np.abs(np.abs(x) - 1) > 0.05]  # away from the kinks at 0, +-1, +-3, 6
        x = x[(np.abs(x) > 0.05) & (np.abs(np.abs(x) - 3) > 0.05) & (np.abs(x - 6) > 0.05)]
        g = np.asarray(plax.vmap(plax.grad(fn))(jnp.asarray(x)))
        eps = 1e-6
        fd = (ref(x + eps) - ref(x - eps)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8, err_msg=name)


_ELEMENTWISE = nn_cases.elementwise(nn)
_KINKS = {-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0}
# piecewise functions, whose derivative at a kink is a convention that must match exactly
_PIECEWISE = {"identity", "relu", "relu6", "sparse_sigmoid", "sparse_plus", "leaky_relu",
              "leaky_relu_02", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish",
              "elu", "elu_alpha2", "selu", "celu", "celu_alpha05"}


@pytest.mark.parametrize("width", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(_ELEMENTWISE))
def test_values_and_gradients_equal_jax(name, width):
    """Every activation at the recorded points, the kinks included, against JAX 0.10."""
    fn, points = _ELEMENTWISE[name]
    rec = nn_cases.answers()[f"elementwise_{width}"][name]
    rtol, atol = (1e-5, 1e-6) if width == "float32" else (1e-12, 1e-13)
    with plax.config.override("jax_enable_x64", width == "float64"):
        x = jnp.asarray(np.asarray(points, width))
        value = fn(x)
        grad = plax.vmap(plax.grad(fn))(x)
        assert str(value.dtype) == rec["dtype"]
    want_v, want_g = nn_cases.floats(rec["value"]), nn_cases.floats(rec["grad"])
    np.testing.assert_allclose(np.asarray(value, np.float64), want_v, rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(grad, np.float64), want_g, rtol=rtol, atol=atol)
    # at the kinks the derivative is a convention (relu'(0) = 0, relu6'(6) = 0, ...): exact
    kinks = _KINKS if name in _PIECEWISE else {0.0} if name in ("softplus", "log_sigmoid") else ()
    at_kinks = np.isin(np.asarray(points), list(kinks))
    if name.startswith(("elu", "selu", "celu")):
        at_kinks &= np.asarray(points) >= 0
    np.testing.assert_array_equal(np.asarray(grad, np.float64)[at_kinks], want_g[at_kinks])


def test_relu_derivative_conventions():
    x = jnp.array([-1.0, 0.0, 1.0, 6.0, 7.0])
    np.testing.assert_array_equal(plax.vmap(plax.grad(nn.relu))(x), [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(plax.vmap(plax.grad(nn.relu6))(x), [0, 0, 1, 0, 0])
    assert float(plax.grad(nn.softplus)(0.0)) == 0.5
    assert float(plax.grad(plax.grad(nn.softplus))(0.0)) == 0.25
    assert float(plax.jit(plax.grad(nn.relu))(0.0)) == 0.0


def test_softplus_gradient_at_infinities_matches_jax():
    x = jnp.array([-np.inf, np.inf, -100.0, 100.0])
    g = np.asarray(plax.vmap(plax.grad(nn.softplus))(x))
    np.testing.assert_allclose(g, [0, 1, 0, 1], atol=1e-30)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_jit_and_vmap(name):
    fn, _ = REFERENCES[name]
    x = jnp.asarray(_x((4, 5), 7).astype(np.float32))
    eager = np.asarray(fn(x))
    # a compiling backend may use its own float32 exp/tanh/logistic (a few ulps)
    np.testing.assert_allclose(np.asarray(plax.jit(fn)(x)), eager, rtol=2e-6, atol=1e-6)
    batched = np.asarray(plax.vmap(fn)(x))
    loop = np.stack([np.asarray(fn(x[i])) for i in range(4)])
    # atol is one float32 ulp at 1 and more: gelu_tanh's 1 + tanh(z) cancels near z = -4, where
    # a kernel for 20 elements and one for 5 may each be off by an ulp of tanh (0.1% relative)
    np.testing.assert_allclose(batched, loop, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.vmap(fn, in_axes=1, out_axes=1)(x)), eager,
                               rtol=1e-6, atol=1e-6)


def test_parameters_broadcast_and_are_differentiable():
    x = jnp.array([-2.0, -1.0, 3.0])
    alpha = jnp.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(nn.elu(x, alpha), _np_elu(np.asarray(x), np.asarray(alpha)),
                               rtol=1e-6)
    g = plax.grad(lambda a: nn.leaky_relu(x, a).sum())(0.1)
    np.testing.assert_allclose(g, -3.0, rtol=1e-6)
    g = plax.grad(lambda b: nn.squareplus(2.0, b))(4.0)
    np.testing.assert_allclose(g, 0.25 / np.sqrt(8.0), rtol=1e-6)


# JAX raises an IndexError ("tuple index out of range") from inside mean for an axis out of
# range (standardize of a 0-d input normalises over axis -1); plax raises the ValueError JAX
# raises everywhere else (tests/numpy/test_jnp_errors.py, JAX_ARTEFACTS)
JAX_ARTEFACTS = {"standardize/pyfloat": ["error", "ValueError"],
                 "standardize/pyint": ["error", "ValueError"]}


@pytest.mark.parametrize("key", sorted(nn_cases.answers()["dtypes"]))
def test_result_dtype_and_weak_type_match_jax(key):
    want = JAX_ARTEFACTS.get(key) or nn_cases.answers()["dtypes"][key]
    fname, iname = key.split("/")
    x = nn_cases.dtype_inputs(np, jnp)[iname]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = getattr(nn, fname)(x)
    except Exception as e:  # noqa: BLE001
        assert want[0] == "error", f"{key}: plax raised {e!r}, JAX returned {want}"
        assert want[1] in [c.__name__ for c in type(e).__mro__], (key, e)
        return
    assert want[0] != "error", f"{key}: JAX raised {want[1]}, plax returned {r.dtype}"
    assert [str(r.dtype), bool(r.aval.weak_type)] == want, key


def test_glu_halves_along_axis():
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    for axis in (0, 1, -1):
        a, b = np.split(x, 2, axis)
        np.testing.assert_allclose(nn.glu(jnp.asarray(x), axis=axis), a * _np_sigmoid(b),
                                   rtol=1e-6)
    assert plax.vmap(nn.glu)(jnp.asarray(x)).shape == (4, 3)


def test_glu_rejects_an_odd_axis_like_jax():
    with pytest.raises(AssertionError, match="divisible by 2"):
        nn.glu(jnp.ones((3, 5)))
    with pytest.raises(AssertionError, match="divisible by 2"):
        nn.glu(jnp.ones((3, 4)), axis=0)


def test_lists_are_rejected():
    with pytest.raises(TypeError):
        nn.relu([1.0, 2.0])
    with pytest.raises(TypeError, match="soft_sign"):
        nn.soft_sign([1.0, 2.0])


def test_aliases():
    assert nn.swish is nn.silu and nn.hard_swish is nn.hard_silu
    assert nn.tanh is jnp.tanh


def test_make_jaxpr_names_the_activation():
    text = str(plax.make_jaxpr(nn.relu)(jnp.ones(3)))
    assert "custom_jvp_call" in text and "name=relu" in text
    assert "name=gelu" in str(plax.make_jaxpr(nn.gelu)(jnp.ones(3)))

"""lax.reduce_window (add/max/min): values against a loop reference, max- and
average-pooling gradients (order 2) against finite differences, vmap against a loop, jit
against eager, and JAX's errors. Cross-checked against JAX when installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax.lax.convolution import padtype_to_pads
from plax.test_util import check_grads
from plax.testing.conformance.harness import rand_distinct
from plax.testing.conformance.spec_convolution import window_ref

RNG = np.random.default_rng(0)
MONOIDS = {"sum": (lax.add, 0.0), "max": (lax.max, -np.inf), "min": (lax.min, np.inf),
           "prod": (lax.mul, 1.0)}

# (shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
CASES = [
    ((6,), (2,), (1,), "VALID", None, None),
    ((5, 6), (2, 3), (2, 1), "SAME", None, None),
    ((4, 7), (2, 2), (1, 2), [(1, 1), (0, -1)], None, (1, 2)),
    ((3, 4, 5), (1, 2, 2), (1, 1, 2), "SAME", None, (1, 1, 2)),
    ((4, 5), (2, 2), (1, 1), [(1, 0), (0, 1)], (2, 1), None),
]
IDS = [f"case{i}" for i in range(len(CASES))]


def _x(shape):
    # well-separated values: no ties, so max/min are differentiable at the sample
    return rand_distinct(RNG, shape, np.float32)


def _ref(x, which, wd, ws, pad, bd, wdl):
    nd = x.ndim
    bd, wdl = bd or (1,) * nd, wdl or (1,) * nd
    if isinstance(pad, str):
        pad = padtype_to_pads([(n - 1) * b + 1 for n, b in zip(x.shape, bd)],
                              [(w - 1) * d + 1 for w, d in zip(wd, wdl)], ws, pad)
    return window_ref(x, which=which, window_dimensions=wd, window_strides=ws, padding=pad,
                      base_dilation=bd, window_dilation=wdl)


@pytest.mark.parametrize("which", list(MONOIDS))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values(which, case):
    shape, *rest = case
    x = _x(shape)
    comp, init = MONOIDS[which]
    got = lax.reduce_window(x, init, comp, *rest)
    np.testing.assert_allclose(np.asarray(got), _ref(x, which, *rest), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("which", list(MONOIDS))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_jax(which, case):
    jax = pytest.importorskip("jax")
    shape, *rest = case
    x = _x(shape)
    comp, init = MONOIDS[which]
    jcomp = {"sum": jax.lax.add, "max": jax.lax.max, "min": jax.lax.min,
             "prod": jax.lax.mul}[which]
    np.testing.assert_allclose(np.asarray(lax.reduce_window(x, init, comp, *rest)),
                               np.asarray(jax.lax.reduce_window(x, init, jcomp, *rest)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("which", list(MONOIDS))
@pytest.mark.parametrize("case", CASES[:4], ids=IDS[:4])
def test_grads_order_2(which, case):
    # (base dilation is left out here: with it some max windows hold only holes, -inf)
    shape, *rest = case
    comp, init = MONOIDS[which]
    check_grads(lambda x: lax.reduce_window(x, init, comp, *rest), (_x(shape),), order=2,
                modes=("fwd", "rev"))


def test_sum_grad_with_base_dilation():
    shape, *rest = CASES[4]
    check_grads(lambda x: lax.reduce_window(x, 0.0, lax.add, *rest), (_x(shape),), order=2,
                modes=("fwd", "rev"))


def test_max_pool_gradient_routes_to_the_max():
    x = np.array([[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 7.0, 6.0]], np.float32)
    g = plax.grad(lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2),
                                              "VALID").sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 0, 0], [0, 0, 1, 0]])


def test_average_pool_gradient():
    x = _x((1, 4, 4, 1))
    pool = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1),  # noqa: E731
                                       "VALID") / 4
    g = plax.grad(lambda x: pool(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.full(x.shape, 0.25), rtol=1e-6)


@pytest.mark.parametrize("which", list(MONOIDS))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_matches_loop(which, axis):
    shape, *rest = CASES[1]
    comp, init = MONOIDS[which]
    f = lambda x: lax.reduce_window(x, init, comp, *rest)  # noqa: E731
    xs = [_x(shape) for _ in range(3)]
    expected = np.stack([np.asarray(f(x)) for x in xs])
    # a window sum may cancel to a small value, which a kernel summing in another order
    # gets within a few ulps of the inputs, not of the result: tolerate that absolutely
    atol = 8 * np.finfo(np.float32).eps * float(np.abs(np.stack(xs)).max()) \
        if which == "sum" else 0
    got = plax.vmap(f, axis)(np.stack(xs, axis))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=atol)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.vmap(f, axis))(np.stack(xs, axis))),
                               expected, rtol=1e-6, atol=atol)
    g = plax.grad(lambda x: f(x).sum())
    np.testing.assert_allclose(np.asarray(plax.vmap(g)(np.stack(xs))),
                               np.stack([np.asarray(g(x)) for x in xs]), rtol=1e-6, atol=atol)


@pytest.mark.parametrize("which", list(MONOIDS))
def test_jit_matches_eager(which):
    shape, *rest = CASES[2]
    comp, init = MONOIDS[which]
    f = lambda x: lax.reduce_window(x, init, comp, *rest)  # noqa: E731
    x = _x(shape)
    np.testing.assert_array_equal(np.asarray(plax.jit(f)(x)), np.asarray(f(x)))
    gf = plax.grad(lambda x: (f(x) ** 2).sum())
    np.testing.assert_allclose(np.asarray(plax.jit(gf)(x)), np.asarray(gf(x)), rtol=1e-6)


def test_integer_operands_and_identities():
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    got = lax.reduce_window(x, np.iinfo(np.int32).min, lax.max, (1, 2), (1, 1), "SAME")
    np.testing.assert_array_equal(np.asarray(got), [[1, 2, 3, 4, 4], [6, 7, 8, 9, 9]])
    got = lax.reduce_window(x, 0, lax.add, (2, 2), (1, 1), "VALID")
    np.testing.assert_array_equal(np.asarray(got), _ref(x, "sum", (2, 2), (1, 1), "VALID",
                                                        None, None))
    assert got.dtype == np.int32


def test_prod_of_empty_windows_and_integers():
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    got = lax.reduce_window(x, 1, lax.mul, (1, 2), (1, 1), [(0, 0), (1, 0)])
    np.testing.assert_array_equal(np.asarray(got), [[1, 2, 6], [4, 20, 30]])
    assert lax.reduce_window(x, 1, lax.mul, (3, 1), (1, 1), "VALID").shape == (0, 3)


@pytest.mark.parametrize("which,init", [("sum", 1.5), ("max", 0.25), ("min", -0.5),
                                        ("prod", 2.0)])
def test_other_init_values_enter_each_window_once(which, init):
    x = _x((5,))
    comp = MONOIDS[which][0]
    args = ((2,), (1,), [(1, 1)])
    got = lax.reduce_window(x, init, comp, *args)
    base = _ref(x, which, *args, None, None)
    expected = {"sum": base + init, "max": np.maximum(base, init),
                "min": np.minimum(base, init), "prod": base * init}[which]
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    jlax = pytest.importorskip("jax.lax")
    jcomp = {"sum": jlax.add, "max": jlax.max, "min": jlax.min, "prod": jlax.mul}[which]
    np.testing.assert_allclose(np.asarray(got), np.asarray(jlax.reduce_window(x, init, jcomp,
                                                                              *args)), rtol=1e-6)
    # a traced init value differentiates too
    check_grads(lambda x, c: lax.reduce_window(x, c, comp, *args), (x, np.float32(init)),
                order=1, modes=("fwd", "rev"))


def test_jaxpr_uses_jax_primitive_names():
    x = _x((4, 4))
    for comp, init, name in ((lax.add, 0.0, "reduce_window_sum"),
                             (lax.max, -np.inf, "reduce_window_max"),
                             (lax.min, np.inf, "reduce_window_min")):
        jaxpr = plax.make_jaxpr(lambda x: lax.reduce_window(x, init, comp, (2, 2), (1, 1),
                                                            "VALID"))(x)
        assert name in str(jaxpr)


def test_errors():
    x = _x((2, 4, 5))
    with pytest.raises(TypeError, match="wrong number of window_dimensions.*\\(2, 4, 5\\)"):
        lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 1, 1), "VALID")
    with pytest.raises(TypeError, match="window_strides must be positive"):
        lax.reduce_window(x, 0.0, lax.add, (1, 2, 2), (1, 0, 1), "VALID")
    with pytest.raises(NotImplementedError, match="lax.add, lax.mul, lax.max and lax.min"):
        lax.reduce_window(x, 1.0, lax.sub, (1, 2, 2), (1, 1, 1), "VALID")
    with pytest.raises(TypeError, match="init_value must be a scalar"):
        lax.reduce_window(x, np.ones(2, np.float32), lax.add, (1, 2, 2), (1, 1, 1), "VALID")
    # complex max/min windows are computed, as JAX computes them (lexicographically:
    # tests/lax/test_complex_clamp_windows.py); their derivative is refused, as JAX's
    z = x.astype(np.complex64)
    assert lax.reduce_window(z, -np.inf, lax.max, (1, 2, 2), (1, 1, 1), "VALID").shape == \
        (2, 3, 4)
    with pytest.raises(TypeError, match="complex64"):
        plax.jvp(lambda z: lax.reduce_window(z, -np.inf, lax.max, (1, 2, 2), (1, 1, 1),
                                             "VALID"), (z,), (z,))

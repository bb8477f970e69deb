"""lax.conv_general_dilated and its wrappers: values against a float64 loop reference and
scipy.signal, gradients (order 2) against finite differences, vmap against a loop, jit
against eager, and JAX's errors for bad shapes. Cross-checked against JAX when installed."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads
from plax.testing.conformance.spec_convolution import conv_ref

RNG = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _ref(x, w, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
         dimension_numbers=None, feature_group_count=1, batch_group_count=1):
    """The loop reference, with padding names and layout strings resolved here."""
    dn = lax.conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    lhs_dilation = lhs_dilation or (1,) * nsp
    rhs_dilation = rhs_dilation or (1,) * nsp
    if isinstance(padding, str):
        window = [(w.shape[a] - 1) * d + 1 for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = lax.padtype_to_pads([x.shape[a] for a in dn.lhs_spec[2:]], window,
                                      window_strides, padding)
    return conv_ref(x, w, window_strides=window_strides, padding=padding,
                    lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dn,
                    feature_group_count=feature_group_count,
                    batch_group_count=batch_group_count, preferred_element_type=None)


CASES = [
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(2,), padding="SAME")),
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(1,), padding="SAME_LOWER", rhs_dilation=(2,))),
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(window_strides=(2, 1), padding=[(1, -1), (2, 0)],
                                      lhs_dilation=(2, 1), rhs_dilation=(1, 2))),
    ((2, 6, 5, 4), (3, 2, 4, 5), dict(window_strides=(1, 1), padding="VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 6, 7), (6, 3, 3), dict(window_strides=(2,), padding=[(1, 2)], feature_group_count=2)),
    ((4, 6, 7), (6, 6, 3), dict(window_strides=(2,), padding=[(2, 0)], batch_group_count=2,
                                rhs_dilation=(2,))),
    ((2, 7, 4), (6, 4, 3), dict(window_strides=(1,), padding="VALID",
                                dimension_numbers=("NWC", "OIW", "CWN"))),
    ((1, 2, 4, 3, 3), (2, 2, 2, 2, 1), dict(window_strides=(1, 2, 1), padding="SAME")),
]
IDS = [f"case{i}" for i in range(len(CASES))]


@pytest.mark.parametrize("ls,rs,kw", CASES, ids=IDS)
def test_values_match_loop_reference(ls, rs, kw):
    x, w = _rand(*ls), _rand(*rs)
    got = lax.conv_general_dilated(x, w, **kw)
    np.testing.assert_allclose(np.asarray(got), _ref(x, w, **kw), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ls,rs,kw", CASES, ids=IDS)
def test_matches_jax(ls, rs, kw):
    jlax = pytest.importorskip("jax.lax")
    x, w = _rand(*ls), _rand(*rs)
    np.testing.assert_allclose(np.asarray(lax.conv_general_dilated(x, w, **kw)),
                               np.asarray(jlax.conv_general_dilated(x, w, **kw)),
                               rtol=1e-5, atol=1e-5)


def test_2d_matches_scipy_correlate():
    signal = pytest.importorskip("scipy.signal")
    x, w = _rand(9, 8).astype(np.float64), _rand(3, 4).astype(np.float64)
    with plax.config.override("enable_x64", True):
        for mode, padding in (("valid", "VALID"), ("full", [(2, 2), (3, 3)])):
            got = lax.conv(x[None, None], w[None, None], (1, 1), padding)[0, 0]
            np.testing.assert_allclose(np.asarray(got), signal.correlate2d(x, w, mode=mode),
                                       rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ls,rs,kw", CASES, ids=IDS)
def test_grads_order_2(ls, rs, kw):
    x, w = _rand(*ls), _rand(*rs)
    check_grads(lambda x, w: lax.conv_general_dilated(x, w, **kw), (x, w), order=2,
                modes=("fwd", "rev"))


@pytest.mark.parametrize("ls,rs,kw", CASES, ids=IDS)
@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (None, 2), (-1, 0)])
def test_vmap_matches_loop(ls, rs, kw, in_axes):
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)  # noqa: E731
    xs = [_rand(*ls) for _ in range(3)]
    ws = [_rand(*rs) for _ in range(3)]
    ax, aw = in_axes
    bx = np.stack(xs, ax) if ax is not None else xs[0]
    bw = np.stack(ws, aw) if aw is not None else ws[0]
    expected = np.stack([np.asarray(f(xs[i] if ax is not None else xs[0],
                                      ws[i] if aw is not None else ws[0])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(plax.vmap(f, in_axes)(bx, bw)), expected,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.vmap(f, in_axes))(bx, bw)), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ls,rs,kw", CASES[:4], ids=IDS[:4])
def test_jit_matches_eager_and_grad_under_jit(ls, rs, kw):
    x, w = _rand(*ls), _rand(*rs)
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)  # noqa: E731
    np.testing.assert_allclose(np.asarray(plax.jit(f)(x, w)), np.asarray(f(x, w)), rtol=1e-6)
    loss = lambda x, w: (f(x, w) ** 2).sum()  # noqa: E731
    for a, b in zip(plax.jit(plax.grad(loss, (0, 1)))(x, w), plax.grad(loss, (0, 1))(x, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_vmap_of_grad_matches_loop():
    x, w = _rand(3, 2, 3, 6), _rand(4, 3, 2)
    g = plax.grad(lambda x, w: (lax.conv(x, w, (1,), "SAME") ** 2).sum(), argnums=1)
    got = plax.vmap(g, (0, None))(x, w)
    expected = np.stack([np.asarray(g(x[i], w)) for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)


def test_integer_and_bool_and_preferred_type():
    x = RNG.integers(-3, 4, (2, 3, 5)).astype(np.int8)
    w = RNG.integers(-3, 4, (2, 3, 2)).astype(np.int8)
    got = lax.conv(x, w, (1,), "VALID", preferred_element_type=np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), _ref(x.astype(np.int32), w.astype(np.int32),
                                                         window_strides=(1,), padding="VALID"))
    b = lax.conv(x > 0, w > 0, (1,), "VALID")
    assert b.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(b), _ref(x > 0, w > 0, window_strides=(1,),
                                                      padding="VALID"))


def test_conv_dimension_numbers_and_padtype_to_pads():
    dn = lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == ((0, 1, 2),) * 3
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME_LOWER") == [(1, 1), (1, 0)]
    assert lax.padtype_to_pads((5,), (3,), (1,), "VALID") == [(0, 0)]


def test_wrappers():
    x, w = _rand(2, 3, 6, 5), _rand(4, 3, 2, 2)
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (2, 1), "SAME")),
                               _ref(x, w, window_strides=(2, 1), padding="SAME"), rtol=1e-5,
                               atol=1e-5)
    got = lax.conv_with_general_padding(x, w, (1, 1), [(1, 0), (0, 2)], (2, 1), (1, 2))
    np.testing.assert_allclose(np.asarray(got), _ref(x, w, window_strides=(1, 1),
                                                     padding=[(1, 0), (0, 2)],
                                                     lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 2), (0, 1)]])
@pytest.mark.parametrize("strides", [(1, 1), (2, 3)])
def test_conv_transpose_matches_jax(padding, strides):
    jlax = pytest.importorskip("jax.lax")
    x, w = _rand(2, 5, 4, 3), _rand(3, 2, 3, 4)
    for tk in (False, True):
        kw = dict(strides=strides, padding=padding, transpose_kernel=tk)
        if tk:
            kw["rhs_dilation"] = (1, 2)
        w2 = w if not tk else _rand(3, 2, 4, 3)
        got = lax.conv_transpose(x, w2, **kw)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jlax.conv_transpose(x, w2, **kw)),
                                   rtol=1e-5, atol=1e-5)


def test_conv_transpose_is_the_gradient_of_conv():
    # transpose_kernel=True with "SAME" padding gives the lhs gradient of a strided SAME conv
    x, w = _rand(1, 6, 6, 2), _rand(3, 3, 2, 4)
    dn = ("NHWC", "HWIO", "NHWC")
    y, vjp = plax.vjp(lambda x: lax.conv_general_dilated(x, w, (2, 2), "SAME",
                                                         dimension_numbers=dn), x)
    ct = _rand(*y.shape)
    (expected,) = vjp(ct)
    got = lax.conv_transpose(ct, w, (2, 2), "SAME", dimension_numbers=dn, transpose_kernel=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_jaxpr_shows_primitive():
    jaxpr = plax.make_jaxpr(lambda x, w: lax.conv(x, w, (1,), "VALID"))(_rand(1, 1, 4),
                                                                       _rand(1, 1, 2))
    assert "conv_general_dilated" in str(jaxpr)


def test_bad_shapes_raise_jax_classes():
    x = _rand(2, 4, 5)
    with pytest.raises(ValueError, match="rhs input feature dimension size.*4 // 1 != 2"):
        lax.conv_general_dilated(x, _rand(6, 2, 3), (1,), "VALID")
    with pytest.raises(ValueError, match="feature_group_count must divide lhs feature"):
        lax.conv_general_dilated(x, _rand(6, 2, 3), (1,), "VALID", feature_group_count=3)
    with pytest.raises(ValueError, match="multiple of feature_group_count, but 5"):
        lax.conv_general_dilated(x, _rand(5, 2, 3), (1,), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="batch_group_count must divide lhs batch"):
        lax.conv_general_dilated(x, _rand(6, 4, 3), (1,), "VALID", batch_group_count=3)
    with pytest.raises(ValueError, match="feature_group_count must be a positive integer"):
        lax.conv_general_dilated(x, _rand(6, 4, 3), (1,), "VALID", feature_group_count=0)
    with pytest.raises(ValueError, match="window_strides"):
        lax.conv_general_dilated(x, _rand(6, 4, 3), (1, 1), "VALID")
    with pytest.raises(TypeError, match="ndim to be equal, got 3 and 4"):
        lax.conv_general_dilated(x, _rand(6, 4, 3, 1), (1,), "VALID")
    with pytest.raises(TypeError, match="same set of spatial characters"):
        lax.conv_general_dilated(x, _rand(6, 4, 3), (1,), "VALID",
                                 dimension_numbers=("NCH", "OIW", "NCH"))
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.conv_general_dilated(x, _rand(6, 4, 3), (1,), "FOO")
    with pytest.raises(TypeError, match="same dtype, got float32 and int32"):
        lax.conv_general_dilated(x, np.ones((6, 4, 3), np.int32), (1,), "VALID")


# Zero-size operands: XLA gives zeros of the output shape (a sum over no input channels is
# zero; an empty batch, output feature or spatial axis leaves nothing to compute).
ZERO_CASES = {
    "input_channels": ((2, 0, 5, 5), (3, 0, 2, 2), {}),
    "input_channels_feature_groups": ((2, 0, 5, 5), (4, 0, 2, 2), dict(feature_group_count=2)),
    "input_channels_padded_dilated": ((2, 0, 5, 5), (3, 0, 2, 2), dict(
        padding=[(1, 2), (0, 1)], lhs_dilation=(2, 1), rhs_dilation=(1, 2),
        window_strides=(2, 1))),
    "input_channels_large_window": ((1, 0, 9, 9), (2, 0, 6, 6), {}),  # the im2col path
    "batch": ((0, 2, 5, 5), (3, 2, 2, 2), {}),
    "batch_groups": ((0, 2, 5, 5), (4, 2, 2, 2), dict(batch_group_count=2)),
    "output_channels": ((2, 2, 5, 5), (0, 2, 2, 2), {}),
    "input_spatial": ((2, 2, 0, 5), (3, 2, 1, 2), {}),
    "output_spatial": ((2, 2, 1, 5), (3, 2, 2, 2), {}),
}
# shapes XLA gives (recorded from JAX 0.10.2; test_zero_size_matches_jax checks them live)
ZERO_SHAPES = {
    "input_channels": (2, 3, 4, 4), "input_channels_feature_groups": (2, 4, 4, 4),
    "input_channels_padded_dilated": (2, 3, 6, 4), "input_channels_large_window": (1, 2, 4, 4),
    "batch": (0, 3, 4, 4), "batch_groups": (0, 4, 4, 4), "output_channels": (2, 0, 4, 4),
    "input_spatial": (2, 3, 0, 4), "output_spatial": (2, 3, 0, 4),
}
_BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"))]


def _zero_conv(name):
    """(the convolution's keyword arguments, random lhs, random rhs) of a zero-size case."""
    ls, rs, kw = ZERO_CASES[name]
    return dict(dict(window_strides=(1, 1), padding="VALID"), **kw), _rand(*ls), _rand(*rs)


@pytest.mark.parametrize("backend", _BACKENDS)
@pytest.mark.parametrize("name", list(ZERO_CASES))
def test_zero_size_gives_zeros_on_every_backend(name, backend):
    kw, x, w = _zero_conv(name)
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)  # noqa: E731
    out = plax.jit(f, backend=backend)(x, w)
    assert out.shape == ZERO_SHAPES[name] and out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), np.zeros(ZERO_SHAPES[name], np.float32))
    # the gradients' convolutions are zero-size too: zeros of the operands' shapes
    gx, gw = plax.jit(plax.grad(lambda x, w: (f(x, w) * 3.0).sum(), (0, 1)),
                      backend=backend)(x, w)
    np.testing.assert_array_equal(np.asarray(gx), np.zeros_like(x))
    np.testing.assert_array_equal(np.asarray(gw), np.zeros_like(w))


@pytest.mark.parametrize("name", list(ZERO_CASES))
def test_zero_size_matches_jax(name):
    jax = pytest.importorskip("jax")
    kw, x, w = _zero_conv(name)
    want = jax.lax.conv_general_dilated(x, w, **kw)
    assert tuple(want.shape) == ZERO_SHAPES[name]
    np.testing.assert_array_equal(np.asarray(lax.conv_general_dilated(x, w, **kw)),
                                  np.asarray(want))

"""plax.nn's block-scaled products (scaled_matmul, scaled_dot_general,
get_scaled_dot_general_config) against a NumPy reference that quantizes with ml_dtypes' own
casts, and (where JAX is installed) against JAX's quantizer and configs. JAX's
scaled_matmul itself has no CPU lowering, so its values are not compared."""
import numpy as np
import pytest

import ml_dtypes

import plax
import plax.numpy as jnp
from plax import nn
from plax.nn.scaled import _quantize

R = np.random.default_rng(3)
E4M3 = ml_dtypes.float8_e4m3fn
E2M1 = ml_dtypes.float4_e2m1fn


def _np_quantize(x, mode, global_scale=1.0):
    """Block quantization along the last axis, the reference way: ml_dtypes casts."""
    x = np.asarray(x, np.float32)
    bs = 32 if mode == "mxfp8" else 16
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // bs, bs))
    if mode == "mxfp8":
        amax = np.abs(blocks).max(-1, keepdims=True)
        with np.errstate(divide="ignore"):
            exp = np.ceil(np.log2(amax / np.float32(448.0)))
        scale = np.exp2(np.clip(np.where(amax > 0, exp, -127), -127, 127)).astype(np.float32)
        q = np.clip(blocks / scale, -448, 448).astype(E4M3).astype(np.float32)
    else:
        blocks = blocks / np.float32(global_scale)
        amax = np.abs(blocks).max(-1, keepdims=True)
        scale = np.clip(amax / np.float32(6.0), 0, 448).astype(E4M3).astype(np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(scale > 0, np.clip(blocks / scale, -6, 6), 0).astype(E2M1)
        q = q.astype(np.float32)
    return q.reshape(x.shape), scale[..., 0]


def _dequant(x, mode, global_scale=1.0):
    q, s = _np_quantize(x, mode, global_scale)
    bs = q.shape[-1] // s.shape[-1]
    return q * np.repeat(s, bs, axis=-1)


def test_scaled_matmul_matches_its_definition():
    a = R.standard_normal((2, 3, 64)).astype(np.float32)
    b = R.standard_normal((2, 5, 64)).astype(np.float32)
    sa = R.uniform(0.5, 2, (2, 3, 2)).astype(np.float32)
    sb = R.uniform(0.5, 2, (2, 5, 4)).astype(np.float32)
    out = nn.scaled_matmul(a, b, sa, sb)
    ref = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 32, -1), b * np.repeat(sb, 16, -1))
    assert out.dtype == np.float32 and out.shape == (2, 3, 5)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)
    assert nn.scaled_matmul(a, b, sa, sb, preferred_element_type=jnp.bfloat16).dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(plax.jit(nn.scaled_matmul)(a, b, sa, sb)),
                               np.asarray(out), rtol=1e-6)
    with pytest.raises(ValueError, match="3-dimensional"):
        nn.scaled_matmul(a[0], b, sa, sb)
    with pytest.raises(ValueError, match="matching batch"):
        nn.scaled_matmul(a, b[:, :, :32], sa, sb)
    with pytest.raises(ValueError, match="divide"):
        nn.scaled_matmul(a, b, sa[..., :1].repeat(3, -1), sb)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_quantize_against_ml_dtypes(mode):
    x = (R.standard_normal((2, 3, 64)) * np.exp(R.uniform(-6, 6, (2, 3, 64)))).astype(np.float32)
    x[0, 0, :32] = 0.0   # an all-zero block
    gs = 1.0 if mode == "mxfp8" else 0.7
    cfg = nn.get_scaled_dot_general_config(mode, None if mode == "mxfp8"
                                           else jnp.array([gs], jnp.float32))
    q, s = _quantize(jnp.asarray(x), cfg)
    rq, rs = _np_quantize(x, mode, gs)
    np.testing.assert_array_equal(np.asarray(s), rs)
    np.testing.assert_array_equal(np.asarray(q), rq)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_quantize_against_jax(mode):
    jax = pytest.importorskip("jax", reason="cross-check with JAX's quantizer (not in CI)")
    from jax._src.cudnn.scaled_matmul_stablehlo import quantize as jax_quantize
    x = (R.standard_normal((2, 3, 64)) * np.exp(R.uniform(-6, 6, (2, 3, 64)))).astype(np.float32)
    jcfg = jax.nn.get_scaled_dot_general_config(mode)
    pcfg = nn.get_scaled_dot_general_config(mode)
    for field in ("mode", "block_size", "data_type", "scale_type", "infer_only"):
        assert getattr(jcfg, field) == getattr(pcfg, field)
    # jitted: one XLA compilation instead of one per operation (4.7 s -> 0.7 s for both modes;
    # the same bits as eager on 80 arrays of this distribution)
    jq, js = jax.jit(lambda x: jax_quantize(x, jcfg))(x)
    q, s = _quantize(jnp.asarray(x), pcfg)
    np.testing.assert_array_equal(np.asarray(q), np.asarray(jq.astype(np.float32)))
    np.testing.assert_array_equal(np.asarray(s), np.asarray(js.astype(np.float32)))


def test_config_errors():
    with pytest.raises(ValueError, match="mode"):
        nn.get_scaled_dot_general_config("int8")
    cfg = nn.get_scaled_dot_general_config("nvfp4")
    assert cfg.block_size == 16 and np.asarray(cfg.global_scale).tolist() == [1.0]


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_forward(mode):
    gs = 1.0 if mode == "mxfp8" else 0.5
    cfg = nn.get_scaled_dot_general_config(mode, None if mode == "mxfp8"
                                           else jnp.array([gs], jnp.float32))
    configs = [cfg] * 3
    # batched, contracting last
    x = R.standard_normal((3, 8, 64)).astype(np.float32)
    y = R.standard_normal((3, 4, 64)).astype(np.float32)
    out = nn.scaled_dot_general(x, y, (((2,), (2,)), ((0,), (0,))), configs=configs)
    ref = np.einsum("bmk,bnk->bmn", _dequant(x, mode, gs), _dequant(y, mode, gs)) * gs * gs
    assert out.shape == (3, 8, 4) and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-4)
    # no batch dims, rhs contracting first: blocks run along each operand's contraction
    w = R.standard_normal((64, 5)).astype(np.float32)
    out = nn.scaled_dot_general(x[0], w, (((1,), (0,)), ((), ())), configs=configs)
    ref = _dequant(x[0], mode, gs) @ _dequant(w.T, mode, gs).T * gs * gs
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-4)
    # quantization error is what it should be: a few percent of the exact product
    exact = x[0] @ w
    assert np.abs(np.asarray(out) - exact).max() < 0.25 * np.abs(exact).max()
    np.testing.assert_allclose(
        np.asarray(plax.jit(lambda a, b: nn.scaled_dot_general(
            a, b, (((1,), (0,)), ((), ())), configs=configs))(x[0], w)), np.asarray(out),
        rtol=1e-6)


def test_scaled_dot_general_without_configs_is_dot_general():
    x = R.standard_normal((4, 6)).astype(np.float32)
    y = R.standard_normal((6, 3)).astype(np.float32)
    out = nn.scaled_dot_general(x, y, (((1,), (0,)), ((), ())))
    np.testing.assert_allclose(np.asarray(out), x @ y, rtol=1e-5)
    with pytest.warns(DeprecationWarning):
        nn.scaled_dot_general(x, y, (((1,), (0,)), ((), ())), implementation="cudnn")
    cfg = [nn.get_scaled_dot_general_config("mxfp8")] * 3
    with pytest.raises(ValueError, match="multiple of the block size"):
        nn.scaled_dot_general(x, y, (((1,), (0,)), ((), ())), configs=cfg)


def test_scaled_dot_general_gradients():
    cfg = [nn.get_scaled_dot_general_config("mxfp8")] * 3
    x = R.standard_normal((2, 32, 64)).astype(np.float32)
    y = R.standard_normal((2, 32, 64)).astype(np.float32)
    g = R.standard_normal((2, 32, 32)).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    _, vjp = plax.vjp(lambda a, b: nn.scaled_dot_general(a, b, dn, configs=cfg), x, y)
    gx, gy = vjp(jnp.asarray(g))
    # d lhs[b,m,k] = sum_n g[b,m,n] rhs[b,n,k]: both quantized along n (the backward contraction)
    ref_gx = np.einsum("bmn,bkn->bmk", _dequant(g, "mxfp8"),
                       _dequant(np.swapaxes(y, 1, 2), "mxfp8"))
    ref_gy = np.einsum("bnm,bkm->bnk", _dequant(np.swapaxes(g, 1, 2), "mxfp8"),
                       _dequant(np.swapaxes(x, 1, 2), "mxfp8"))
    np.testing.assert_allclose(np.asarray(gx), ref_gx, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gy), ref_gy, rtol=1e-5, atol=1e-4)
    # nvfp4: the gradient products run unquantized (as in JAX)
    cfg4 = [nn.get_scaled_dot_general_config("nvfp4")] * 3
    _, vjp = plax.vjp(lambda a, b: nn.scaled_dot_general(a, b, dn, configs=cfg4), x, y)
    gx, gy = vjp(jnp.asarray(g))
    np.testing.assert_allclose(np.asarray(gx), np.einsum("bmn,bnk->bmk", g, y), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(np.asarray(gy), np.einsum("bmn,bmk->bnk", g, x), rtol=1e-4,
                               atol=1e-4)

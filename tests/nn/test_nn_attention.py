"""plax.nn.dot_product_attention: against a NumPy float64 reference, against JAX's recorded
values and gradients (masks, causal, bias, sequence lengths, windows, residual), jit, vmap and
JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import nn

import nn_cases


def _np_attention(q, k, v, bias=None, mask=None, causal=False, scale=None):
    """Reference: (B, T, N, H) queries, (B, S, K, H) keys/values, grouped heads."""
    B, T, N, H = q.shape
    K = k.shape[2]
    k = np.repeat(k, N // K, axis=2)
    v = np.repeat(v, N // K, axis=2)
    scale = 1 / np.sqrt(H) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + bias
    keep = np.ones(logits.shape, bool)
    if mask is not None:
        keep &= mask
    if causal:
        keep &= np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(keep, logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


def _rand(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("N,K", [(2, 2), (4, 2), (3, 1)])
def test_against_numpy(N, K):
    B, T, S, H = 2, 3, 5, 4
    q, k, v = _rand(0, (B, T, N, H)), _rand(1, (B, S, K, H)), _rand(2, (B, S, K, H))
    bias = _rand(3, (B, N, T, S))
    mask = _rand(4, (1, 1, T, S)) > -0.7
    mask[..., 0] = True
    for kwargs in ({}, {"bias": bias}, {"mask": mask}, {"scale": 0.3}):
        ref = _np_attention(q, k, v, **kwargs)
        got = nn.dot_product_attention(jnp.asarray(q.astype(np.float32)),
                                       jnp.asarray(k.astype(np.float32)),
                                       jnp.asarray(v.astype(np.float32)),
                                       **{n: jnp.asarray(a) if n != "scale" else a
                                          for n, a in kwargs.items()})
        assert got.dtype == np.float32 and got.shape == q.shape
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    qs, ks, vs = _rand(5, (B, T, N, H)), _rand(6, (B, T, K, H)), _rand(7, (B, T, K, H))
    got = nn.dot_product_attention(*(jnp.asarray(a.astype(np.float32)) for a in (qs, ks, vs)),
                                   is_causal=True)
    np.testing.assert_allclose(got, _np_attention(qs, ks, vs, causal=True), rtol=1e-5,
                               atol=1e-5)


def test_float64_computes_the_softmax_in_float32_like_jax():
    q, k, v = _rand(0, (1, 3, 2, 4)), _rand(1, (1, 3, 2, 4)), _rand(2, (1, 3, 2, 4))
    with plax.config.override("jax_enable_x64", True):
        got = nn.dot_product_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v))
        assert got.dtype == np.float64
    np.testing.assert_allclose(got, _np_attention(q, k, v), rtol=1e-6, atol=1e-6)


_ATTENTION = nn_cases.attention(nn)


@pytest.mark.parametrize("width", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(_ATTENTION))
def test_values_and_gradients_equal_jax(name, width):
    fn, qkv = _ATTENTION[name]
    rec = nn_cases.answers()[f"attention_{width}"][name]
    with plax.config.override("jax_enable_x64", width == "float64"):
        q, k, v = (jnp.asarray(a.astype(width)) for a in qkv)
        out = fn(q, k, v)
        assert str(out.dtype) == rec["dtype"] and list(out.shape) == rec["shape"]
        w = jnp.asarray(nn_cases.weights(out.shape).astype(width))
        grads = plax.grad(lambda q, k, v: jnp.sum(fn(q, k, v) * w), argnums=(0, 1, 2))(q, k, v)
    np.testing.assert_allclose(np.asarray(out, np.float64).ravel(),
                               nn_cases.floats(rec["value"]), rtol=1e-5, atol=1e-6)
    for g, want in zip(grads, rec["grads"]):
        np.testing.assert_allclose(np.asarray(g, np.float64).ravel(), nn_cases.floats(want),
                                   rtol=1e-5, atol=1e-6)


def test_sequence_lengths_zero_the_padded_queries():
    q, k, v = (jnp.asarray(_rand(i, (2, 4, 1, 3)).astype(np.float32)) for i in range(3))
    out = nn.dot_product_attention(q, k, v, query_seq_lengths=jnp.array([2, 4], jnp.int32),
                                   key_value_seq_lengths=jnp.array([3, 1], jnp.int32))
    np.testing.assert_array_equal(np.asarray(out)[0, 2:], 0)
    # batch 1 sees only its first key: every query returns the first value
    np.testing.assert_allclose(np.asarray(out)[1, :, 0], np.repeat(np.asarray(v)[1, :1, 0], 4, 0),
                               rtol=1e-6)


def test_jit_and_vmap():
    q, k, v = (jnp.asarray(_rand(i, (3, 2, 4, 2, 3)).astype(np.float32)) for i in range(3))

    def f(q, k, v):
        return nn.dot_product_attention(q, k, v, is_causal=True)

    eager = np.asarray(f(q[0], k[0], v[0]))
    np.testing.assert_allclose(plax.jit(f)(q[0], k[0], v[0]), eager, rtol=1e-6, atol=1e-6)
    batched = np.asarray(plax.vmap(f)(q, k, v))
    np.testing.assert_allclose(batched[0], eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(batched[2], f(q[2], k[2], v[2]), rtol=1e-6, atol=1e-6)


def test_bad_input_like_jax():
    q = jnp.ones((1, 2, 4, 3))
    k = jnp.ones((1, 5, 2, 3))
    with pytest.raises(ValueError, match="value dtype"):
        nn.dot_product_attention(q, k, k.astype(jnp.float16))
    with pytest.raises(ValueError, match="value shape"):
        nn.dot_product_attention(q, k, jnp.ones((1, 5, 2, 4)))
    with pytest.raises(ValueError, match="query shape"):
        nn.dot_product_attention(jnp.ones((1, 2, 4, 5)), k, k)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        nn.dot_product_attention(jnp.ones((1, 2, 3, 3)), k, k)
    with pytest.raises(ValueError, match="mask dtype"):
        nn.dot_product_attention(q, k, k, mask=jnp.ones((1, 4, 2, 5)))
    with pytest.raises(ValueError, match="query_seq_lengths"):
        nn.dot_product_attention(q, k, k, query_seq_lengths=jnp.array([1.0]))
    with pytest.raises(ValueError, match="Unsupported implementation"):
        nn.dot_product_attention(q, k, k, implementation="flash")
    with pytest.raises(NotImplementedError, match="cuDNN"):
        nn.dot_product_attention(q, k, k, implementation="cudnn")
    assert nn.dot_product_attention(q, k, k, implementation="xla").shape == q.shape

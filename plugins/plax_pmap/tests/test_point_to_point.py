"""lax.psend / lax.precv under vmap(axis_name=...) (one process): values against NumPy,
pytrees, jit, grad, and the errors for the pairings plax cannot run (plax_pmap.point_to_point
says why). JAX runs psend/precv on GPUs only, so there is no CPU answer of JAX to compare
with; the pmap/shard_map runs on 2 and 4 devices are in multi_device_checks.py."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

X = np.arange(12, dtype=np.float32).reshape(4, 3)


def _send_recv(perm):
    def f(x):
        token = lax.psend(x, "i", perm)
        return lax.precv(token, plax.ShapeDtypeStruct(x.shape, x.dtype), "i", perm)
    return f


def _ref(x, perm):
    out = np.zeros_like(x)
    for s, d in perm:
        out[d] = x[s]
    return out


@pytest.mark.parametrize("perm", [[(0, 1)], [(0, 1), (1, 2), (2, 3)], [(3, 0)],
                                  [(0, 1), (1, 0), (2, 3), (3, 2)]])
def test_values_match_numpy(perm):
    np.testing.assert_array_equal(plax.vmap(_send_recv(perm), axis_name="i")(X), _ref(X, perm))


def test_pipeline_round_trip_under_jit():
    """JAX's two-device test: send forward, compute on the receiver, send the result back."""
    w = np.array([[2.0], [3.0]], np.float32)

    def f(a):
        like = plax.ShapeDtypeStruct(a.shape, a.dtype)
        data = lax.precv(lax.psend(a, "i", [(0, 1)]), like, "i", [(0, 1)])
        res = jnp.broadcast_to(jnp.dot(data, w), a.shape)
        return lax.precv(lax.psend(res, "i", [(1, 0)]), like, "i", [(1, 0)])

    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    out = plax.jit(plax.vmap(f, axis_name="i"))(a)
    np.testing.assert_array_equal(out, [[a[0] @ w[:, 0]] * 2, [0, 0]])


def test_pytree_and_token_through_jit():
    tree = {"a": X, "b": X[:, :1].astype(np.int32)}
    perm = [(0, 2)]

    def f(t):
        tokens = lax.psend(t, "i", perm)
        tokens = plax.jit(lambda tk: tk)(tokens)                 # a token is a pytree
        return {k: lax.precv(tokens[k], t[k], "i", perm) for k in t}

    out = plax.vmap(f, axis_name="i")(tree)
    for k in tree:
        np.testing.assert_array_equal(out[k], _ref(tree[k], perm))
        assert out[k].dtype == tree[k].dtype


def test_grad_is_the_reverse_send():
    perm = [(0, 1), (1, 2)]
    w = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    g = plax.grad(lambda x: jnp.sum(plax.vmap(_send_recv(perm), axis_name="i")(x) * w))(X)
    np.testing.assert_array_equal(g, _ref(w, [(d, s) for s, d in perm]))


def test_token_prints_its_pairs():
    seen = []
    plax.vmap(lambda x: seen.append(repr(lax.psend(x, "i", [(0, 1)]))) or x, axis_name="i")(X)
    assert seen == ["SendToken(axis_name='i', perm=[(0, 1)])"]


def _recv_with(token_of, out_shape=None, perm=((0, 1),), axis="i"):
    def f(x):
        return lax.precv(token_of(x), out_shape or plax.ShapeDtypeStruct(x.shape, x.dtype),
                         axis, list(perm))
    return plax.vmap(f, axis_name="i")(X)


def test_errors():
    with pytest.raises(TypeError, match="SendToken that psend returned"):
        _recv_with(lambda x: x)                                  # not a token
    with pytest.raises(ValueError, match="does not match its psend"):
        _recv_with(lambda x: lax.psend(x, "i", [(0, 1)]), perm=[(1, 0)])
    with pytest.raises(TypeError, match="out_shape"):
        _recv_with(lambda x: lax.psend(x, "i", [(0, 1)]),
                   out_shape=plax.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(TypeError, match="out_shape"):
        _recv_with(lambda x: lax.psend(x, "i", [(0, 1)]),
                   out_shape=plax.ShapeDtypeStruct((3,), np.int32))
    with pytest.raises(ValueError, match="unique"):
        plax.vmap(lambda x: lax.psend(x, "i", [(0, 1), (2, 1)]), axis_name="i")(X)
    with pytest.raises(ValueError, match="pairs"):
        plax.vmap(lambda x: lax.psend(x, "i", [0, 1]), axis_name="i")(X)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.psend(X, "i", [(0, 1)])

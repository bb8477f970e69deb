"""``jax.fwd_and_bwd`` (against ``vjp`` and hand-derived gradients, beside JAX 0.10.2 where
installed) and ``jax.tree.static``."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def _f(x, w):
    return jnp.tanh(x @ w)


@pytest.mark.parametrize("jitted", [True, False])
def test_matches_vjp(jitted):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    x, w = jnp.asarray(x, np.float32), jnp.asarray(w, np.float32)
    ct = jnp.ones((3, 2))
    fwd, bwd = plax.fwd_and_bwd(_f, argnums=(0, 1), jitted=jitted)
    y, res = fwd(x, w)
    want_y, pullback = plax.vjp(_f, x, w)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    for got, want in zip(bwd(res, ct), pullback(ct)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # d/dw sum(tanh(x @ w)) = x.T @ (1 - tanh^2)
    t = np.tanh(np.asarray(x, np.float64) @ np.asarray(w, np.float64))
    np.testing.assert_allclose(bwd(res, ct)[1], np.asarray(x, np.float64).T @ (1 - t ** 2),
                               rtol=1e-5)


def test_single_argnum_aux_and_one_compile():
    traces = []

    def f(x, w):
        traces.append(1)
        return x * w, {"aux": w}
    fwd, bwd = plax.fwd_and_bwd(f, argnums=1, has_aux=True)
    for k in range(3):
        y, res, aux = fwd(jnp.float32(2.0), jnp.float32(k))
        g = bwd(res, jnp.float32(1.0))
        assert float(g) == 2.0 and float(aux["aux"]) == k  # a bare cotangent for an int argnum
    assert len(traces) == 1  # fwd traced once; bwd compiled once and reused
    with pytest.raises(ValueError, match="out of range"):
        plax.fwd_and_bwd(f, argnums=5, jitted=False)[0](1.0, 2.0)


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    x, w = np.ones((2, 3), np.float32), np.full((3, 2), 0.5, np.float32)
    ours = plax.fwd_and_bwd(_f, argnums=(0, 1))
    theirs = jax.fwd_and_bwd(lambda x, w: jax.numpy.tanh(x @ w), argnums=(0, 1))
    (y1, r1), (y2, r2) = ours[0](x, w), theirs[0](x, w)
    np.testing.assert_allclose(y1, y2, rtol=1e-6)
    for a, b in zip(ours[1](r1, np.ones((2, 2), np.float32)),
                    theirs[1](r2, np.ones((2, 2), np.float32))):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_tree_static_fields_are_structure():
    @plax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: plax.Array
        y: plax.Array
        op: str = plax.tree.static(default="add")

    m = Op(x=jnp.ones(3), y=jnp.arange(3))
    leaves, treedef = plax.tree.flatten(m)
    assert len(leaves) == 2
    assert repr(treedef) == "PyTreeDef(CustomNode(Op[('add',)], [*, *]))"
    assert plax.tree.unflatten(treedef, leaves).op == "add"
    field = plax.tree.static(default=1, metadata={"doc": "d"})
    assert dict(field.metadata) == {"doc": "d", "static": True}

"""scatter with repeated indices: the JVP carries the tangent of the update that landed."""
from __future__ import annotations


def test_scatter_jvp_with_repeated_indices(backend_name):
    """With repeated indices one update wins each position (which one is the backend's choice);
    the JVP must carry the tangent of the update whose value landed there, and the operand's
    tangent where nothing was written."""
    import numpy as np

    import plax
    from plax import lax
    from plax.lax import GatherScatterMode, ScatterDimensionNumbers

    from .harness import to_arrays

    rng = np.random.default_rng(0)
    x = np.arange(6, dtype=np.float32) * 10
    idx = np.array([[1], [3], [1], [1], [4], [3]], np.int32)
    u = np.arange(1, 7, dtype=np.float32) * 0.5  # distinct, and distinct from x
    tx, tu = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))

    def f(x, u):
        return lax.scatter_p.bind(x, idx, u, dimension_numbers=dn, indices_are_sorted=False,
                                  unique_indices=False, mode=GatherScatterMode.FILL_OR_DROP)

    out, t_out = plax.jvp(f, to_arrays([x, u]), to_arrays([tx, tu]))
    out, t_out = np.asarray(out), np.asarray(t_out)
    for p in range(6):
        if p in idx:
            (winner,) = np.flatnonzero(u == out[p])
            assert idx[winner, 0] == p, f"position {p} holds update {winner}, scattered elsewhere"
            assert t_out[p] == tu[winner], f"position {p}: tangent of update {winner} expected"
        else:
            assert out[p] == x[p] and t_out[p] == tx[p]
    # reverse mode agrees: <vjp(ct), t> == <ct, jvp(t)>
    ct = rng.standard_normal(6).astype(np.float32)
    _, f_vjp = plax.vjp(f, *to_arrays([x, u]))
    cx, cu = f_vjp(to_arrays([ct])[0])
    lhs = np.dot(np.asarray(cx), tx) + np.dot(np.asarray(cu), tu)
    np.testing.assert_allclose(lhs, np.dot(ct, t_out), rtol=1e-5)

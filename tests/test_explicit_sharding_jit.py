"""``jit`` of explicitly sharded programs: what runs on each device (issue 25, item 2).

A partitioned program (:mod:`plax.sharding_spmd`) runs on every device on the blocks it
holds -- its arguments are never gathered onto one device -- with exchanges between the
devices where its types call for them (a split contracting dimension, a reduction over a
split dimension, a reshard). The results carry the shardings of their types, with the
values of the unsharded program.
"""
from subprocess_util import last_json, run_python

_SCRIPT = r'''
import json
import numpy as np
import plax
from plax import array as array_mod
jnp, P = plax.numpy, plax.P
plax.set_mesh(plax.make_mesh((2, 4), ("X", "Y")))
a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
x = plax.device_put(a, P("X", "Y"))
y = plax.device_put(np.ones((8, 4), np.float32), P("X", None))
gathered = lambda v: array_mod._BUF.__get__(v) is not array_mod._NOT_GATHERED
# y is less split than the sum it takes part in: each device cuts its part of its own block
r, t = plax.jit(lambda u, v: (jnp.sin(u) * 2 + v, (u * 2).T))(x, y)
s = plax.jit(lambda v, c: jnp.sum(v * c, axis=1))(y, jnp.float32(3))
c = plax.jit(lambda v: jnp.cumsum(v, axis=1))(y)
blockwise_gathered = [gathered(x), gathered(y)]
g = plax.jit(lambda u: u @ jnp.ones((4, 3)))(x)  # a product of blocks: nothing gathered
print(json.dumps({
    "blockwise_gathered": blockwise_gathered, "dot_gathered": gathered(x),
    "results_gathered": [gathered(r), gathered(s), gathered(t)],
    "types": [str(plax.typeof(v)) for v in (r, s, t, g)],
    "pieces": [len(r._pieces), len(s._pieces), len(t._pieces)],
    # (against float64: the kernel's float32 sin may differ from NumPy's in the last bit)
    "values": [bool(np.allclose(np.asarray(r), np.sin(a.astype(np.float64)) * 2 + 1,
                                rtol=1e-6, atol=1e-6)),
               bool(np.array_equal(np.asarray(s), np.full(8, 12.0))),
               bool(np.array_equal(np.asarray(t), (a * 2).T)),
               bool(np.array_equal(np.asarray(g), a @ np.ones((4, 3)))),
               bool(np.array_equal(np.asarray(c), np.cumsum(np.ones((8, 4)), axis=1))),
               str(plax.typeof(c)), gathered(c)],
    "shards": [[sh.device.id, list(sh.data.shape)] for sh in r.addressable_shards],
}))
'''


def test_blockwise_programs_run_where_the_blocks_are():
    out = last_json(run_python(_SCRIPT, env={"PLAX_NUM_CPU_DEVICES": "8",
                                              "PLAX_PLATFORMS": "cpu"}))
    assert out["blockwise_gathered"] == [False, False]
    assert out["dot_gathered"] is False
    assert out["results_gathered"] == [False, False, False]
    assert out["types"] == ["float32[8@X,4@Y]", "float32[8@X]", "float32[4@Y,8@X]",
                            "float32[8@X,3]"]
    assert out["pieces"] == [8, 8, 8]
    assert out["values"] == [True] * 5 + ["float32[8@X,4]", False]
    assert out["shards"] == [[d, [4, 1]] for d in range(8)]


def test_plan_says_what_runs_on_blocks_and_what_moves():
    import numpy as np
    import plax
    from plax.core.jaxpr import ClosedJaxpr
    from plax.sharding_partition import describe
    from plax.sharding_spmd import plan
    mesh = plax.make_mesh((1,), ("X",))
    with plax.set_mesh(mesh):
        x = plax.device_put(np.ones((4, 2), np.float32), plax.P("X"))
        jnp = plax.numpy

        def steps(f):
            closed = plax.make_jaxpr(f)(x)
            return describe(plan(ClosedJaxpr(closed.jaxpr, closed.consts)))

        assert steps(lambda u: jnp.exp(u) * 2 - 1) == ["segment: exp, mul, sub"]
        assert steps(lambda u: jnp.sum(u, axis=1)) == ["segment: reduce_sum"]
        assert steps(lambda u: u.T + 1) == ["segment: transpose, add"]
        # the split dimension: partial sums, added over X
        assert steps(lambda u: jnp.sum(u, axis=0)) == [
            "segment: reduce_sum", "exchange: ((),) -> ((),) partial ('X',) by add"]
        assert steps(lambda u: u @ jnp.ones((2, 2))) == ["segment: broadcast_in_dim, dot_general"]
        assert steps(lambda u: jnp.cumsum(u, axis=1) * 2) == ["segment: cumsum, mul"]
        assert steps(lambda u: jnp.sort(u, axis=1)) == ["segment: sort"]
        # a constant array: each device cuts its block of it
        assert steps(lambda u: u + np.arange(8.0, dtype=np.float32).reshape(4, 2)) == [
            "cut: ((), ()) -> (('X',), ())", "segment: add"]

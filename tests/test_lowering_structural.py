"""Structural fusion (``FusionOptions(structural=True)``, ``Emitter.fuses_structural``): a unit
reading values through ``slice``/``concatenate``/``reshape``/``squeeze``/``pad``/``rev``/
``transpose`` absorbs the units
feeding it, and becomes one cluster over its own shape; only where a generator asks, never
through a broadcast that repeats a computed value, never taking a value something else reads."""
from __future__ import annotations

import numpy as np

import plax
from plax import lax, random
from plax import numpy as jnp
from plax.lowering import STRUCTURAL, Cluster, Emitter, FusionOptions, find_clusters, fusion_kind
from plax.lowering import fusion_units, spliced_calls

_ALL = FusionOptions(multiple_results=True, index=True, scalars=True, structural=True)


def _names(units):
    return [[e.primitive.name for e in u.eqns] if isinstance(u, Cluster) else u.primitive.name
            for u in units]


def _original_bits_jaxpr(n: int):
    """``random.bits`` of ``n`` words in the original threefry layout, its calls inlined."""
    class Fusing(Emitter):
        fuses = fuses_index = fuses_multiple_results = fuses_structural = True
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", False)
    try:
        closed = plax.make_jaxpr(lambda k: random.bits(k, (n,)))(random.PRNGKey(0))
    finally:
        plax.config.update("jax_threefry_partitionable", saved)
    return spliced_calls(closed.jaxpr), Fusing


def test_structural_primitives_fuse_only_when_asked():
    assert fusion_kind(lax.slice_p) is None and fusion_kind(lax.concatenate_p) is None
    assert not Emitter.fuses_structural and not FusionOptions().structural
    jaxpr, _ = _original_bits_jaxpr(999)
    plain = list(find_clusters(jaxpr, FusionOptions(multiple_results=True, index=True)))
    assert "concatenate" in _names(plain) and len(plain) > 3


def test_original_threefry_layout_is_one_cluster_over_the_output():
    # counters 0..998 padded to 1000, halves hashed as pairs, words concatenated, pad sliced
    jaxpr, fusing = _original_bits_jaxpr(999)
    (cluster,) = find_clusters(jaxpr, _ALL)   # (the key's words sliced from its data too)
    assert cluster.shape == (999,) and cluster.outputs == list(jaxpr.outvars)
    assert cluster.inputs[0] is jaxpr.invars[0]
    names = [e.primitive.name for e in cluster.eqns]
    assert names.count("threefry2x32") == 1 and names.count("concatenate") == 2, names
    assert fusing.fusion_options().structural
    # the lowering driver's units for that emitter: the same single cluster
    assert [u.shape for u in fusion_units(jaxpr, fusing) if isinstance(u, Cluster)] == [(999,)]


def test_no_absorption_of_values_read_elsewhere_or_too_small_to_recompute():
    from plax.lowering.fusion import STRUCTURAL_MAX_REPEAT

    def shared(x):
        y = jnp.exp(x)
        return jnp.concatenate([y, y[:2]]), y * 2.0   # y is an output's operand too

    def repeated(x):
        y = jnp.exp(x)                                  # 4 values, each read 8 times
        z = lax.broadcast_in_dim(y, (8, 4), (1,))
        return jnp.reshape(z, (32,))[1:] + jnp.reshape(lax.broadcasted_iota(np.float32, (8, 4), 0), (32,))[1:]

    x = np.ones(4, np.float32)
    units = _names(find_clusters(plax.make_jaxpr(shared)(x).jaxpr, _ALL))
    assert ["exp"] not in units and "exp" in units and ["slice", "concatenate"] in units, units
    # exp is not cheap and has fewer than 1/STRUCTURAL_MAX_REPEAT of the reader's 31 elements;
    # the iota is cheap (an index map): it joins
    assert 4 * STRUCTURAL_MAX_REPEAT < 31
    jaxpr = plax.make_jaxpr(repeated)(x).jaxpr
    units = _names(find_clusters(jaxpr, _ALL))
    merged = [u for u in units if isinstance(u, list) and "slice" in u]
    assert len(merged) == 1 and "exp" not in merged[0] and "iota" in merged[0], units
    # unless the reader is small enough for any value to be computed per element
    options = FusionOptions(multiple_results=True, index=True, structural=True,
                            recompute_max_elements=31)
    (unit,) = find_clusters(jaxpr, options)
    assert "exp" in _names([unit])[0]


def test_structural_kinds_are_registered():
    prims = (lax.slice_p, lax.concatenate_p, lax.reshape_p, lax.squeeze_p, lax.pad_p, lax.rev_p,
             lax.transpose_p, lax.dynamic_slice_p, lax.gather_p)
    assert all(fusion_kind(p, structural=True) == STRUCTURAL for p in prims)
    assert all(fusion_kind(p) is None for p in prims)


def test_pad_rev_transpose_join_their_reader_with_what_feeds_them():
    # each moves elements, so a reader through it absorbs the unit computing its operand
    x, y = np.ones((3, 5), np.float32), np.ones((5, 3), np.float32)
    programs = {
        "pad": (lambda x, y: jnp.pad(jnp.exp(x), ((1, 0), (2, 3))) * 2.0, {"exp", "pad", "mul"}),
        "interior pad": (lambda x, y: lax.pad(jnp.sin(x), 0.0, ((0, 1, 2), (-2, 1, 1))) + 1.0,
                         {"sin", "pad", "add"}),
        "rev": (lambda x, y: jnp.flip(jnp.tanh(x)) + x, {"tanh", "rev", "add"}),
        "transpose": (lambda x, y: (x * 2.0).T + y, {"mul", "transpose", "add"}),
        "transposed output": (lambda x, y: jnp.transpose(jnp.cos(y)), {"cos", "transpose"}),
        "dynamic_slice": (lambda x, y: lax.dynamic_slice(jnp.exp(x), (1, jnp.int32(2)), (2, 2)) - 1.0,
                          {"exp", "dynamic_slice", "sub"}),
    }
    for name, (f, prims) in programs.items():
        jaxpr = spliced_calls(plax.make_jaxpr(f)(x, y).jaxpr)   # (jnp.pad is a jitted call)
        (unit,) = find_clusters(jaxpr, _ALL)
        assert isinstance(unit, Cluster), (name, unit)
        assert {e.primitive.name for e in unit.eqns} >= prims, (name, unit)
        assert unit.shape == tuple(jaxpr.outvars[0].aval.shape) and unit.parts is not None
        # without the option: pad, rev and transpose stay lone equations
        plain = _names(find_clusters(jaxpr, FusionOptions(multiple_results=True, index=True)))
        assert len(plain) > 1 and \
            (prims & {"pad", "rev", "transpose", "dynamic_slice"}) <= set(plain), (name, plain)


def test_a_pad_reads_its_operand_once_but_a_broadcast_after_it_repeats_it():
    # exp of 10 values padded to 50: each element evaluates exp at most once, so it joins
    # although its values are fewer than 1/STRUCTURAL_MAX_REPEAT of the reader's; repeated
    # 100 times by a broadcast after the pad, it would be evaluated 1000 times: it does not
    def padded(x):
        return lax.pad(jnp.exp(x), 0.0, ((0, 40, 0),)) * 2.0

    def repeated(x):
        return jnp.broadcast_to(lax.pad(jnp.exp(x), 0.0, ((0, 40, 0),)), (100, 50)) * 2.0

    x = np.ones(10, np.float32)
    (unit,) = find_clusters(plax.make_jaxpr(padded)(x).jaxpr, _ALL)
    assert "exp" in _names([unit])[0]
    units = _names(find_clusters(plax.make_jaxpr(repeated)(x).jaxpr, _ALL))
    assert "exp" in units and any(isinstance(u, list) and "pad" in u for u in units), units


def test_views_alone_form_no_cluster():
    # a transpose of a reversed slice moves elements but copies them only: nothing to save
    jaxpr = plax.make_jaxpr(lambda x: jnp.flip(x[1:]).T)(np.ones((3, 4), np.float32)).jaxpr
    assert not any(isinstance(u, Cluster) for u in find_clusters(jaxpr, _ALL))


class _Declining(Emitter):
    """Fuses structurally but declines every cluster made by structural fusion (runs others as
    their equations in one step, on NumPy's kernels): the driver lowers the units it was made
    of as they were."""

    fuses = fuses_structural = True

    def __init__(self):
        import plax_numpy
        self.impls, self.offered = plax_numpy.impls(), []

    def emit_equation(self, eqn):
        kernel = self.impls[eqn.primitive]
        return (lambda *bufs: kernel(*bufs, **eqn.params)) if not eqn.primitive.multiple_results \
            else (lambda *bufs: list(kernel(*bufs, **eqn.params)))

    def emit_cluster(self, cluster):
        self.offered.append(cluster)
        if cluster.parts is not None:
            return None

        def run(*bufs):
            env = {id(v): b for v, b in zip(cluster.inputs, bufs)}
            for e in cluster.eqns:
                out = self.impls[e.primitive](*[env.get(id(v), getattr(v, "val", None))
                                                for v in e.invars], **e.params)
                env[id(e.outvars[0])] = out
            return [env[id(v)] for v in cluster.outputs]
        return run


def test_a_declined_structural_cluster_is_lowered_as_its_parts():
    from plax import plugins
    from plax.lowering import lower

    def f(x):
        y = jnp.sin(x) * 2.0
        return jnp.concatenate([y[1:], jnp.exp(y)]) + 1.0

    x = np.linspace(-1, 1, 5).astype(np.float32)
    jaxpr = plax.make_jaxpr(f)(x).jaxpr
    emitter = _Declining()
    fn = lower(jaxpr, emitter, plugins.registry().backends["numpy"], plax.devices("cpu")[0])
    merged = [c for c in emitter.offered if c.parts is not None]
    assert len(merged) == 1 and len(merged[0].parts) >= 2
    # the parts were offered again as they were: the sin, mul, exp cluster among them
    assert any(c.parts is None and [e.primitive.name for e in c.eqns] == ["sin", "mul", "exp"]
               for c in emitter.offered), emitter.offered
    np.testing.assert_allclose(np.asarray(fn(x)[0]), np.asarray(plax.jit(f, backend="numpy")(x)),
                               rtol=1e-6)


def test_gather_joins_its_reader_and_its_index_producers():
    # x[i] normalizes negative indices (lt, add, select_n), expands them to index vectors,
    # gathers, and the reader adds: one cluster over the reader's shape; a gather reading its
    # indices as they are, with nothing after it, saves no launch and stays a lone equation
    from plax.lax.slicing import GatherDimensionNumbers
    x, i = np.ones((6, 3), np.float32), np.array([1, -2, 5], np.int32)
    jaxpr = spliced_calls(plax.make_jaxpr(lambda x, i: x[i] + 1.0)(x, i).jaxpr)
    (unit,) = find_clusters(jaxpr, _ALL)
    assert isinstance(unit, Cluster) and unit.shape == (3, 3), unit
    assert {"gather", "select_n", "add"} <= {e.primitive.name for e in unit.eqns}
    assert "gather" in _names(find_clusters(jaxpr, FusionOptions(index=True, scalars=True)))
    dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    lone = plax.make_jaxpr(lambda x, i: lax.gather(x, i, dn, (1, 3), mode="clip"))(x, i[:, None])
    assert _names(find_clusters(lone.jaxpr, _ALL)) == ["gather"]


def test_a_gathered_operand_is_computed_per_element_only_where_it_pays():
    # exp of a 1000-row table gathered at 8 rows: computed at the gathered elements only (it
    # joins); exp of a 4-row table gathered at 200 rows would be evaluated 50 times over:
    # it stays a kernel of its own, the gather still joins its reader
    from plax.lowering.fusion import STRUCTURAL_MAX_REPEAT

    def f(table, i):
        return jnp.take(jnp.exp(table), i, axis=0) * 2.0

    big, few = np.ones((1000, 2), np.float32), np.zeros(8, np.int32)
    (unit,) = find_clusters(spliced_calls(plax.make_jaxpr(f)(big, few).jaxpr), _ALL)
    assert "exp" in _names([unit])[0]
    small, many = np.ones((4, 2), np.float32), np.zeros(200, np.int32)
    assert 4 * 2 * STRUCTURAL_MAX_REPEAT < 200 * 2
    units = _names(find_clusters(spliced_calls(plax.make_jaxpr(f)(small, many).jaxpr), _ALL))
    assert "exp" in units and any(isinstance(u, list) and "gather" in u for u in units), units


def test_each_reader_in_a_group_counts_its_reads():
    # y = exp(x) (4 values) read through a concatenation and a pad, their sum repeated 3
    # times by a broadcast (24 elements): each path evaluates y 12 times, 24 in all, more than
    # STRUCTURAL_MAX_REPEAT x 4: y stays a kernel of its own (counting the first path only, 12,
    # it was absorbed)
    from plax.lowering.fusion import STRUCTURAL_MAX_REPEAT

    def f(x, w):
        y = jnp.exp(x)
        t = jnp.concatenate([y, w]) + lax.pad(y, 0.0, ((0, 4, 0),))
        return jnp.broadcast_to(t, (3, 8)) * 2.0

    assert 12 <= 4 * STRUCTURAL_MAX_REPEAT < 24
    x = np.ones(4, np.float32)
    units = _names(find_clusters(spliced_calls(plax.make_jaxpr(f)(x, x).jaxpr), _ALL))
    assert "exp" in units and any(isinstance(u, list) and "pad" in u for u in units), units

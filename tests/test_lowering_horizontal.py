"""Horizontal groups (:func:`plax.lowering.horizontal_groups`): consecutive, independent,
small elementwise units -- an SGD update of parameters of different shapes -- offered to a
generator as one unit (:meth:`plax.lowering.Emitter.emit_group`), only where it asks
(``Emitter.horizontal_max_elements``, default 0: no groups); a group the emitter declines is
lowered unit by unit, and one it takes gets the group's inputs and returns its outputs."""
from __future__ import annotations

import numpy as np

import plax
from plax import numpy as jnp
from plax.lowering import (Cluster, Emitter, FusionOptions, HorizontalGroup, find_clusters,
                           fusion_units, lower)


def _sgd(w, b, v, gw, gb, gv):
    return w - 0.1 * gw, b - 0.1 * gb, v - 0.1 * gv


SHAPES = [(6, 4), (4,), (3,)]


def _sgd_jaxpr():
    args = [np.ones(s, np.float32) for s in SHAPES] * 2
    return plax.make_jaxpr(_sgd)(*args).jaxpr


def _shapes(units):
    return [[m.shape for m in u.members] if isinstance(u, HorizontalGroup)
            else (u.shape if isinstance(u, Cluster) else u.primitive.name) for u in units]


def test_no_groups_unless_asked():
    assert Emitter.horizontal_max_elements == 0 and FusionOptions().horizontal == 0
    assert _shapes(find_clusters(_sgd_jaxpr())) == [(6, 4), (4,), (3,)]


def test_independent_updates_form_one_group_within_the_bound():
    jaxpr = _sgd_jaxpr()
    assert _shapes(find_clusters(jaxpr, FusionOptions(horizontal=24))) == [[(6, 4), (4,), (3,)]]
    # a member above the bound stays a unit of its own and ends the run before it
    assert _shapes(find_clusters(jaxpr, FusionOptions(horizontal=23))) == [(6, 4), [(4,), (3,)]]
    assert _shapes(find_clusters(jaxpr, FusionOptions(horizontal=3))) == [(6, 4), (4,), (3,)]
    (group,) = find_clusters(jaxpr, FusionOptions(horizontal=24))
    assert group.outputs == list(jaxpr.outvars)
    assert all(v in group.inputs for v in jaxpr.invars)


def test_dependent_units_and_reductions_are_not_grouped():
    def chained(x, y):
        a = x * 2.0                      # [3]
        return (y + a[None, :]) * y      # [2, 3], reads a: not independent of it

    def reducing(x, y):
        return jnp.sum(x * 2.0), y * 3.0  # a reduction's cluster is never a member
    x, y = np.ones(3, np.float32), np.ones((2, 3), np.float32)
    options = FusionOptions(horizontal=1 << 20)
    for f in (chained, reducing):
        units = list(find_clusters(plax.make_jaxpr(f)(x, y).jaxpr, options))
        assert not any(isinstance(u, HorizontalGroup) for u in units), units


class _Host(Emitter):
    """Fuses with groups of up to 64 elements; equations run on NumPy's kernels, a group (when
    ``take``) as its members' equations in one step."""

    fuses = True
    horizontal_max_elements = 64

    def __init__(self, take: bool):
        import plax_numpy
        self.impls, self.take, self.groups = plax_numpy.impls(), take, []

    def emit_equation(self, eqn):
        kernel = self.impls[eqn.primitive]
        return lambda *bufs: kernel(*bufs, **eqn.params)

    def emit_group(self, group):
        self.groups.append(group)
        if not self.take:
            return None

        def run(*bufs):
            env = {id(v): b for v, b in zip(group.inputs, bufs)}
            for member in group.members:
                for e in member.eqns:
                    out = self.impls[e.primitive](*[env[id(v)] for v in e.invars], **e.params)
                    env[id(e.outvars[0])] = out
            return [env[id(v)] for v in group.outputs]
        return run


def test_driver_runs_a_group_taken_or_declined():
    from plax import plugins
    backend = plugins.registry().backends["numpy"]
    device = plax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s).astype(np.float32) for s in SHAPES * 2]
    jaxpr = _sgd_jaxpr()
    want = [np.asarray(o) for o in plax.jit(_sgd, backend="numpy")(*args)]
    assert _shapes(fusion_units(jaxpr, _Host)) == [[(6, 4), (4,), (3,)]]
    for take in (True, False):
        emitter = _Host(take)
        fn = lower(jaxpr, emitter, backend, device)
        assert len(emitter.groups) == 1
        assert ("_f0(" in fn.__plax_source__) and (("_f1(" in fn.__plax_source__) != take)
        for g, w in zip(fn(*args), want):
            np.testing.assert_array_equal(np.asarray(g), w)

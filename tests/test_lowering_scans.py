"""The core fusion rule for arg-reductions and cumulative ops
(:func:`plax.lowering.find_clusters` with ``arg_reductions``/``cumulative``): they join the
cluster of the elementwise chain producing their operand only for a generator that asks
(:attr:`plax.lowering.Emitter.fuses_arg_reductions`, ``fuses_cumulative``, default off), an
arg-reduction as a reduction (nothing in the cluster reads it), a cumulative op ending its
cluster and never after a reduction of it. (Written with ``lax.cumsum``: ``jnp.cumsum`` stages
a ``jit`` call, which lowering splices before clustering; ``numba/test_scan_fusion.py``
checks ``jnp.cumsum`` end to end.)"""
from __future__ import annotations

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp
from plax.lowering import (ARG_REDUCTION, CUMULATIVE, Cluster, Emitter, FusionOptions,
                           find_clusters, fusion_kind, order_for_fusion)


def _units(f, *args, **flags):
    jaxpr = plax.make_jaxpr(f)(*args).jaxpr
    return [[e.primitive.name for e in u.eqns] if isinstance(u, Cluster) else u.primitive.name
            for u in find_clusters(order_for_fusion(jaxpr, FusionOptions(**flags)),
                                   FusionOptions(**flags))]


X = np.ones((4, 6), np.float32)


def test_kinds_are_reported_only_when_asked():
    assert fusion_kind(lax.argmax_p) is None and fusion_kind(lax.cumsum_p) is None
    assert fusion_kind(lax.argmin_p, arg_reductions=True) == ARG_REDUCTION
    for p in (lax.cumsum_p, lax.cumprod_p, lax.cummax_p, lax.cummin_p, lax.cumlogsumexp_p):
        assert fusion_kind(p, cumulative=True) == CUMULATIVE
        assert fusion_kind(p, arg_reductions=True) is None


def test_emitter_flags_default_off():
    assert Emitter.fuses_arg_reductions is False and Emitter.fuses_cumulative is False
    assert Emitter.fusion_options() == FusionOptions()


def test_fusion_options_are_the_emitters_flags():
    """The lowering driver's one options value is derived from the ``fuses_*`` flags, each
    flag to its own field."""
    class Scans(Emitter):
        fuses, fuses_cumulative, fuses_scalar_producers = True, True, True
    assert Scans.fusion_options() == FusionOptions(cumulative=True, scalars=True)
    from plax_numba.emitter import NumbaEmitter
    numba = NumbaEmitter.fusion_options()
    assert (numba.multiple_results, numba.index, numba.arg_reductions, numba.cumulative) == (
        True, True, True, True)


def test_without_the_flags_the_old_clusters():
    f = lambda x, y: jnp.argmax(jnp.abs(x - y), axis=1)  # noqa: E731
    assert _units(f, X, X) == [["sub", "abs"], "argmax"]
    g = lambda x: lax.cumsum(jnp.exp(x), axis=1)  # noqa: E731
    assert _units(g, X) == ["exp", "cumsum"]


def test_arg_reduction_joins_its_producers():
    f = lambda x, y: jnp.argmax(jnp.abs(x - y), axis=1)  # noqa: E731
    assert _units(f, X, X, arg_reductions=True) == [["sub", "abs", "argmax"]]
    # beside an ordinary reduction of the same operand (the max and where it is)
    g = lambda x: (jnp.max(x * 2, axis=0), jnp.argmax(x * 2, axis=0))  # noqa: E731
    assert _units(g, X, arg_reductions=True) == [["mul", "reduce_max", "mul", "argmax"]]


def test_nothing_in_the_cluster_reads_an_arg_reduction():
    f = lambda x: jnp.argmax(x * 2, axis=1) + 1  # noqa: E731
    units = _units(f, X, arg_reductions=True)
    assert units[0] == ["mul", "argmax"] and "add" in units[1:]


def test_cumulative_joins_its_producers_and_ends_the_cluster():
    f = lambda x: lax.cumsum(jnp.exp(x), axis=1) * 2  # noqa: E731
    assert _units(f, X, cumulative=True) == [["exp", "cumsum"], "mul"]
    g = lambda x: lax.cummax(x + 1, 0, reverse=True)  # noqa: E731
    assert _units(g, X, cumulative=True) == [["add", "cummax"]]


def test_one_scan_per_cluster_and_none_after_a_reduction():
    f = lambda x: (lax.cumsum(x * 2, axis=0), lax.cumsum(x * 3, axis=1))  # noqa: E731
    assert _units(f, X, cumulative=True) == [["mul", "cumsum"], ["mul", "cumsum"]]
    g = lambda x: (jnp.sum(x * 2, axis=0), lax.cumsum(x * 2, axis=1))  # noqa: E731
    units = _units(g, X, cumulative=True)
    assert units == [["mul", "reduce_sum", "mul"], "cumsum"]


def test_a_backend_that_does_not_opt_in_compiles_as_before():
    """The NumPy backend (no opt-in) runs such a program with unchanged values."""
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    f = plax.jit(lambda v: (jnp.argmax(jnp.abs(v), axis=1), lax.cumsum(v * 2, axis=0)),
                 backend="numpy")
    i, c = f(x)
    np.testing.assert_array_equal(np.asarray(i), np.argmax(np.abs(x), axis=1))
    np.testing.assert_allclose(np.asarray(c), np.cumsum(x.astype(np.float64) * 2, axis=0),
                               rtol=1e-5)

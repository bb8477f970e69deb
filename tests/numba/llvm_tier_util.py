"""What the first tier's tests share (``test_llvm_tier.py``, ``test_llvm_tier_ints.py``,
``test_llvm_tier_loops.py``): a cluster's or a loop program's first-tier kernel built beside
numba's kernel for the same plan (compiled in this process into a cache directory of the
test's), the arguments each step passes, and a bit-for-bit comparison."""
from __future__ import annotations

import numpy as np

import plax
from plax import lax
from plax.core.jaxpr import Literal
from plax.lowering import find_clusters


def only_cluster(fn, *args):
    """``(jaxpr, cluster)``: ``fn``'s jaxpr and its only fusion cluster."""
    jaxpr = plax.make_jaxpr(fn)(*args).jaxpr
    (cluster,) = [c for c in find_clusters(jaxpr) if hasattr(c, "eqns")]
    return jaxpr, cluster


def numba_entry(plan, cache_dir):
    """numba's kernel of ``plan`` (a cluster's or a whole program's), compiled here into
    ``cache_dir``, as the step calls it."""
    from plax_numba import cache
    old = cache._dir
    cache.use_cache_dir(str(cache_dir))
    try:
        text = cache.module_source(plan.source, plan.primitives)
        return cache.entry_point(cache.compile_kernel(text, plan.arg_types), plan.arg_types)
    finally:
        cache._dir = old


def cluster_kernels(cluster, cache_dir, **options):
    """``(plan, first tier's entry point, numba's)`` for ``cluster`` (numba's serial form:
    the same arithmetic as its parallel one, compiled in less time)."""
    from plax_numba import codegen, llvm_tier
    plan = codegen.plan_cluster(cluster, preallocate=True, parallel=False, **options)
    first = llvm_tier.plan(cluster, plan)
    assert first is not None, llvm_tier.declined
    ours = llvm_tier.build(first, plan.primitives, "<test>")
    assert ours is not None
    return plan, ours, numba_entry(plan, cache_dir)


def loop_program(f, *args, which: int = 0):
    """``(program, plan, values)``: the whole-program kernel of the ``which``-th loop
    equation of ``f``'s jaxpr as the Numba emitter plans it (:func:`wholegen.equation_jaxpr`),
    and the values of its operands (those the equations before it make evaluated on the
    NumPy backend)."""
    from plax_numba import wholegen
    closed = plax.make_jaxpr(f)(*args)
    jaxpr = closed.jaxpr
    loops = [e for e in jaxpr.eqns if e.primitive in (lax.scan_p, lax.while_p)]
    target = loops[which]
    env = dict(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, args))
    with plax.default_device(plax.devices("numpy")[0]):
        for eqn in jaxpr.eqns[:jaxpr.eqns.index(target)]:
            ins = [v.val if isinstance(v, Literal) else env[v] for v in eqn.invars]
            outs = eqn.primitive.bind(*ins, **eqn.params)
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else (outs,)))
    values = [np.asarray(v.val) if isinstance(v, Literal) else np.asarray(env[v])
              for v in target.invars]
    program = wholegen.equation_jaxpr(target)
    return program, wholegen.plan_program(program), values


def kernel_args(plan, program, values) -> list:
    """numba's whole-program kernel's arguments, as its step passes them."""
    n_consts = len(plan.arg_types) - 1 - len(program.invars)
    consts = [plan.wrapper_globals[f"_K{i}"] for i in range(n_consts)]
    return consts + [np.ascontiguousarray(v) if np.ndim(v) else np.asarray(v)[()]
                     for v in values] + [1]


def loop_results(f, *args, cache_dir, which: int = 0):
    """``(first tier's outputs, numba kernel's outputs, first tier)`` of the ``which``-th
    loop of ``f`` on ``args``; asserts the tier takes the program."""
    from plax_numba import llvm_tier, llvm_tier_loops
    program, plan, values = loop_program(f, *args, which=which)
    first = llvm_tier_loops.plan(program, plan)
    assert first is not None, llvm_tier.declined
    function = llvm_tier.build(first, plan.primitives, "<test>")
    assert function is not None
    kargs = kernel_args(plan, program, values)
    return function(*kargs), numba_entry(plan, cache_dir)(*kargs), first


def assert_same_bits(mine, theirs) -> None:
    """Each output of ``mine`` has the bits of ``theirs``'s (numba boxes a float32 scalar
    result as a Python float: exact, cast back as the step's wrapper does)."""
    assert len(mine) == len(theirs)
    for m, t in zip(mine, theirs):
        m = np.atleast_1d(np.asarray(m))
        t = np.atleast_1d(np.asarray(t, m.dtype))
        assert m.shape == t.shape
        np.testing.assert_array_equal(m.view(np.uint8), t.view(np.uint8))

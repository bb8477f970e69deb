"""Epilogues (issue 24): elementwise work on a reduction's or an ``argmax``'s results computed in
the reduction's kernel, where each output is final (``plax.lowering.FusionOptions.epilogues``,
``Cluster.epilogue``; ``plax_cupy.codegen``'s ``plax_epilogue``).

* The fusion rule (CPU side): which units join a reduction as its epilogue, the cluster's
  outputs, and that backends that do not ask (NumPy, Numba) are unaffected.
* Values: ``r = reduce(x)`` then ``e = r * c + s`` (``c`` an operand of the results' shape read
  at the output's index, or a broadcast of a vector to it; ``s`` a scalar) for sum, max and
  argmax, float32, float16, bfloat16, float64, int32 and uint8, on every layout of the reduction
  kernel (the whole array, the last axis, a middle axis, a leading axis), with the reduction's
  own result a kernel output or only read by the epilogue: ``plax_reduce`` built for the host
  with a block of ``std::thread``\\ s, one block per output group and the reduction split over
  three blocks (the epilogue in the block that combines the partials). Integers and argmax bit
  for bit against NumPy; float results within the float-sum tolerance, and the epilogue equal
  to the same operations applied by NumPy to the kernel's own reduction result.
* NVRTC compiles them without a warning (where NVRTC is available).
* On the simulated GPU (this file again in a child process): launches of the surveyed
  programs (``benchmarks/gpu_epilogues.py``), a split whole-array mean, and an uncoalesced
  ``argmin`` whose epilogue runs apart; values equal to the NumPy backend's.
"""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.core.jaxpr import Var
from plax.lowering import Cluster

from gpu_env import requires_nvrtc
from kernel_source_util import aval, batch_source, make_eqn
from test_codegen_arg_reductions import _launches, _put
from test_kernels_rows import _kernels, needs_cxx20
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu
from plax_cupy import codegen

BF16 = np.dtype(ml_dtypes.bfloat16)
#: (shape, reduced axes): the whole array, the last axis, a middle axis (before 8 kept: a warp
#: on outputs; before 3: threads on reduced elements), a leading axis
LAYOUTS = [((300,), (0,)), ((5, 70), (1,)), ((3, 20, 8), (1,)), ((4, 9, 3), (1,)),
           ((40, 6), (0,)), ((6, 7), (0, 1))]
#: (kind, dtype) of the reductions
KINDS = [("sum", np.dtype(np.float32)), ("max", np.dtype(np.float16)), ("argmax", BF16),
         ("sum", np.dtype(np.float64)), ("sum", np.dtype(np.int32)), ("max", np.dtype(np.uint8)),
         ("argmax", np.dtype(np.float32)), ("argmax", np.dtype(np.int32))]
cpu_side = pytest.mark.skipif(SIMULATED, reason="checked in the parent process")
_PRIMS = {"sum": lax.reduce_sum_p, "max": lax.reduce_max_p, "argmax": lax.argmax_p}


def _cases():
    """``(kind, dtype, shape, axes, keep, broadcast)``: each kind over three layouts in turn
    (so every layout meets floats, integers and argmax), the reduction's result a kernel
    output (``keep``) or not, the epilogue's operand read at the output's index or broadcast
    from a vector."""
    cases = []
    for i, (kind, dtype) in enumerate(KINDS):
        for j in range(3):
            shape, axes = LAYOUTS[(i + 2 * j) % len(LAYOUTS)]
            if kind == "argmax" and (len(axes) != 1 or not codegen.reads_coalesced(shape, axes)):
                shape, axes = LAYOUTS[(i + 2 * j) % 3]   # (one axis, read coalesced)
            cases.append((kind, dtype, shape, axes, (i + j) % 2 == 0, j == 1))
    return cases


def _cluster(kind, dtype, shape, axes, keep, broadcast):
    """``r = reduce(x, axes)``, ``e = r * c + s`` as one cluster with an epilogue; returns the
    cluster and its inputs' shapes and dtypes."""
    x = Var(aval(shape, dtype))
    if kind == "argmax":
        red = make_eqn(lax.argmax_p, [x], axes=axes, index_dtype=np.dtype(np.int32))
    else:
        red = make_eqn(_PRIMS[kind], [x], axes=axes)
    r = red.outvars[0]
    out_shape, rdt = tuple(r.aval.shape), np.dtype(r.aval.dtype)
    s = Var(aval((), rdt))
    epilogue = []
    if broadcast and out_shape:
        row = Var(aval(out_shape[-1:], rdt))
        b = make_eqn(lax.broadcast_in_dim_p, [row], shape=out_shape,
                     broadcast_dimensions=(len(out_shape) - 1,))
        epilogue.append(b)
        c, c_in = b.outvars[0], row
    else:
        c = c_in = Var(aval(out_shape, rdt))
    m = make_eqn(lax.mul_p, [r, c])
    e = make_eqn(lax.add_p, [m.outvars[0], s])
    epilogue += [m, e]
    outputs = ([r] if keep else []) + [e.outvars[0]]
    cluster = Cluster([red] + epilogue, tuple(shape), [x, c_in, s], outputs,
                      parts=None, epilogue=epilogue)
    return cluster, [(shape, dtype), (tuple(c_in.aval.shape), rdt), ((), rdt)]


def _operand(rng, shape, dtype):
    if dtype.kind in "iu":
        return np.asarray(rng.integers(0, 7, size=shape), dtype)
    return np.asarray(np.round(rng.standard_normal(shape), 2), dtype)


def _reference(kind, x, axes):
    ref = x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == BF16 else x
    if kind == "argmax":
        return np.argmax(ref.astype(np.float32) if x.dtype == BF16 else x, axis=axes[0]).astype(np.int32)
    got = ref.sum(axis=axes) if kind == "sum" else ref.max(axis=axes)
    return np.asarray(got).astype(x.dtype)


def _close(got, want, dtype) -> bool:
    if dtype.kind in "iu":
        return np.array_equal(got, want)
    tol = {np.dtype(np.float16): 2e-3, BF16: 1e-2}.get(dtype, 1e-5)
    return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def _plans():
    return [(case, *_cluster(*case)) for case in _cases()]


@cpu_side
def test_units_on_a_reductions_results_join_it_as_its_epilogue():
    import plax
    from plax import numpy as jnp
    from plax.lowering import FusionOptions, find_clusters
    from plax.lowering.program import fusion_units
    from plax_cupy.emitter import CupyEmitter

    def units(f, *args, options=FusionOptions(epilogues=True, arg_reductions=True)):
        return list(find_clusters(plax.make_jaxpr(f)(*args).jaxpr, options))

    x, v = np.ones((4, 6), np.float32), np.ones(6, np.float32)
    # a lone reduction and a cluster after it: one cluster, the epilogue its last equations
    (c,) = units(lambda x: jnp.sum(x, 0) * 0.25 + 1.0, x)
    assert [e.primitive.name for e in c.epilogue] == ["mul", "add"] and c.shape == (4, 6)
    assert [e.primitive.name for e in c.parts[1].eqns] == ["mul", "add"]
    assert len(c.outputs) == 1 and c.outputs[0] is c.epilogue[-1].outvars[0]
    # without the option: apart, as before
    assert len(units(lambda x: jnp.sum(x, 0) * 0.25 + 1.0, x, options=FusionOptions())) == 2
    # the result also read later: still an output of the merged cluster
    c = units(lambda x: (lambda m: (x - m[:, None], jnp.exp(m)))(jnp.max(x, 1)), x)[0]
    assert [e.primitive.name for e in c.epilogue] == ["exp"] and len(c.outputs) == 2
    # an operand of the results' shape from before the reduction, and an argmax's index
    (c,) = units(lambda x, v: jnp.argmax(x, 0) * 2 + v.astype(jnp.int32), x, v)
    assert c.epilogue and "argmax" in [e.primitive.name for e in c.eqns]
    # an operand computed after the reduction (another reduction's result) is not available
    # at its place: that unit stays apart
    y = np.ones((4, 7), np.float32)
    first, second = units(lambda x, y: jnp.sum(x, 1) / jnp.max(y, 1), x, y)
    assert not isinstance(first, Cluster) and [e.primitive.name for e in second.epilogue] == ["div"]
    # NumPy's and Numba's generators do not ask; the CuPy generator does
    from plax.lowering import Emitter
    assert Emitter.fusion_options().epilogues is False
    assert CupyEmitter.fusion_options().epilogues is True
    j = plax.make_jaxpr(lambda x: jnp.mean(x) * 0.5)(x).jaxpr
    (u,) = fusion_units(j, CupyEmitter)
    assert [e.primitive.name for e in u.epilogue] == ["div", "mul"]


@cpu_side
def test_numpy_and_numba_emitters_form_no_epilogue():
    import plax
    from plax import numpy as jnp
    from plax.lowering import Cluster as C
    from plax.lowering.program import fusion_units
    from plax_numpy.backend import NumpyEmitter
    j = plax.make_jaxpr(lambda x: jnp.sum(x, 0) * 0.25 + 1.0)(np.ones((4, 6), np.float32)).jaxpr
    emitters = [NumpyEmitter]
    try:
        from plax_numba.emitter import NumbaEmitter
        emitters.append(NumbaEmitter)
    except ImportError:
        pass
    for emitter in emitters:
        assert emitter.fusion_options().epilogues is False
        assert not any(isinstance(u, C) and u.epilogue for u in fusion_units(j, emitter))


@cpu_side
@needs_cxx20
def test_epilogues_match_numpy_with_a_block_of_threads(tmp_path):
    plans = [(case, codegen.plan_cluster(cluster), ins) for case, cluster, ins in _plans()]
    source, suffixes = batch_source([plan.source for _, plan, _ in plans])
    source = source.replace('#ifndef PLAX_HOST\nextern "C" __global__ void plax_reduce_k',
                            '#if 1\nextern "C" __global__ void plax_reduce_k')
    run = _kernels(tmp_path, source, preamble=False)
    rng = np.random.default_rng(41)
    failures = []
    for ((kind, dtype, shape, axes, keep, bcast), plan, ins), suffix in zip(plans, suffixes):
        x, c, s = [_operand(rng, sh, dt) for sh, dt in ins]
        r_want = _reference(kind, x, axes)
        groups = -(-plan.n_out // plan.outputs_per_block)
        for bpo in (1, 3):
            outs = [np.full(plan.out_shapes[j], 77, plan.out_dtypes[j]) for j in plan.final_outputs]
            partials = [np.zeros(plan.n_out * bpo * red.partial_items, red.partial_dtype)
                        for _, red in plan.reductions]
            done = np.zeros(plan.n_out, np.uint64)
            bits = [a.view(np.uint16) if a.dtype == BF16 else a for a in (x, c, s)]
            args = [b for b, inp in zip(bits, plan.inputs)]
            run["plax_reduce" + suffix](bpo * min(groups, 2), 32, *args, *partials, *outs,
                                        plan.n_out, plan.n_red, bpo, done, 5)
            e_got = outs[-1]
            r_got = outs[0] if keep else None
            label = (kind, dtype.name, shape, axes, keep, bcast, bpo)
            if r_got is not None and not _close(r_got, r_want, r_want.dtype):
                failures.append(("reduction", label, r_got, r_want))
            cb = np.broadcast_to(c, r_want.shape)
            # the epilogue on the kernel's own result (or, where it is not stored, on NumPy's)
            base = r_got if r_got is not None else r_want
            if r_want.dtype == BF16 or r_want.dtype == np.float16:
                e_want = ((base.astype(np.float32) * cb.astype(np.float32)).astype(r_want.dtype)
                          .astype(np.float32) + np.float32(s)).astype(r_want.dtype)
            else:
                e_want = (base * cb + s).astype(r_want.dtype)
            if not _close(e_got, e_want, r_want.dtype) or done.any():
                failures.append(("epilogue", label, e_got, e_want))
    assert not failures, failures[:3]
    assert len(plans) == 3 * len(KINDS)


@cpu_side
def test_an_epilogue_reading_another_value_of_the_loop_is_declined():
    x = Var(aval((4, 5), np.float32))
    sq = make_eqn(lax.mul_p, [x, x])
    red = make_eqn(lax.reduce_sum_p, [sq.outvars[0]], axes=(1,))
    bad = make_eqn(lax.add_p, [red.outvars[0], red.outvars[0]])
    ok = Cluster([sq, red, bad], (4, 5), [x], [bad.outvars[0]], epilogue=[bad])
    assert "plax_epilogue(" in codegen.plan_cluster(ok).source
    e = make_eqn(lax.reduce_max_p, [x], axes=(0,))   # (another axis, another output shape)
    with pytest.raises(codegen.Unsupported):
        codegen.plan_cluster(Cluster([sq, red, e], (4, 5), [x], [e.outvars[0]], epilogue=[]))


@cpu_side
@requires_nvrtc
def test_epilogues_compile_with_nvrtc_without_warnings():
    from plax_cupy import nvrtc
    plans = [codegen.plan_cluster(cluster) for _, cluster, _ in _plans()][::2]
    # two reductions, the epilogue reading one of them (the other's value is no local of it)
    x = Var(aval((6, 33), np.float32))
    total = make_eqn(lax.reduce_sum_p, [x], axes=(1,))
    top = make_eqn(lax.reduce_max_p, [x], axes=(1,))
    ex = make_eqn(lax.exp_p, [top.outvars[0]])
    plans.append(codegen.plan_cluster(Cluster([total, top, ex], (6, 33), [x],
                                              [total.outvars[0], ex.outvars[0]], epilogue=[ex])))
    assert "e0 =" not in plans[-1].source and "e1 =" in plans[-1].source
    source, _ = batch_source([plan.source for plan in plans])
    ptx = nvrtc.compile_ptx(source, "epilogues.cu")   # (a warning is an error)
    assert ptx.count(".entry plax_reduce") == len(plans)


# ---------------------------------------------------------------- on the simulated GPU

@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=6)   # (this one and the CPU-side tests skip there)


@on_simulated_gpu
def test_surveyed_programs_launch_counts(monkeypatch):
    import os
    import sys
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import gpu_epilogues
    # (softmax, log-softmax, layer norm and x / norm(x) are row-local clusters now, one kernel
    # each: test_codegen_rows_local.py)
    want = {"accuracy mean(argmax(l,-1)==y)": 2, "softmax(x, -1)": 1, "log_softmax(x, -1)": 1,
            "layer norm (x-m)/sqrt(v+eps)": 1, "x / norm(x)": 1, "mean((p-y)**2) * 0.5": 1,
            "sum(x, 0) * 0.25 + 1": 1, "exp(max(x, 1) - 1)": 1}
    for label, fn, args in gpu_epilogues.programs(jnp, plax):
        if label not in want:
            continue
        f = plax.jit(fn)
        launches, got = _launches(f, *[_put(a) for a in args])
        ref = plax.jit(fn, backend="numpy")(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-6,
                                   err_msg=label)
        assert launches == want[label], (label, launches)


@on_simulated_gpu
def test_a_split_mean_and_an_uncoalesced_argmin_with_epilogues(monkeypatch):
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    rng = np.random.default_rng(7)
    x = np.round(rng.standard_normal(100_000), 2).astype(np.float32)   # (split over blocks)
    f = plax.jit(lambda x: jnp.sqrt(jnp.mean(x * x)) * 2.0 - 1.0)
    launches, got = _launches(f, _put(x))
    want = np.asarray(plax.jit(f, backend="numpy")(x))
    assert launches == 1 and np.allclose(np.asarray(got), want, rtol=1e-5), (launches, got, want)
    y = np.round(rng.standard_normal((2, 30, 5)), 1).astype(np.float32)
    g = plax.jit(lambda y: jnp.argmin(jnp.exp(y) - 1.0, axis=1) * 3 + 1)
    launches, got = _launches(g, _put(y))
    # (declined as uncoalesced: the cluster, the rows kernel, then the epilogue's own kernel)
    assert launches == 3 and np.array_equal(np.asarray(got), np.asarray(plax.jit(g, backend="numpy")(y)))


@on_simulated_gpu
@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_a_sampler_reduced_then_scaled_is_one_kernel(partitionable, monkeypatch):
    """A reduction of a structural group (the PRNG's bits computed where the sampler reads
    them) takes its epilogue too: each program one launch (two before)."""
    import plax
    from plax import numpy as jnp, random
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    logits = np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32)
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", partitionable)
    try:
        for fn, args in [(lambda k: jnp.mean(random.normal(k, (1000,))) * 2.0, (random.PRNGKey(1),)),
                         (lambda k, l: random.categorical(k, l) * 2 + 1, (random.PRNGKey(2), logits)),
                         (lambda k: jnp.sum(random.uniform(k, (40, 30)), 1) / 3.0, (random.PRNGKey(3),))]:
            f = plax.jit(fn)
            launches, got = _launches(f, *[_put(a) for a in args])
            want = np.asarray(plax.jit(fn, backend="numpy")(*args))
            assert launches == 1, launches
            if want.dtype.kind == "f":
                np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
            else:
                assert np.array_equal(np.asarray(got), want)
    finally:
        plax.config.update("jax_threefry_partitionable", saved)

"""``argmax``/``argmin`` fused into the CuPy generator's clusters (issue 24): the kernel keeps
each output's best (value, index) pair (``plax_cupy.codegen.ArgReduction``).

* Values: a cluster ``argmax(max(x, lo))`` (``lo`` the dtype's lowest value, so the operand is
  ``x``, NaN and ``-0.0`` included) for every dtype the primitives take, argmax and argmin,
  ranks 1-4 and every layout of the reduced axis (the last, a leading one, a middle one before
  a power of two or 32+ kept elements), several index dtypes, operands full of ties, NaNs and
  signed zeros: ``plax_reduce`` built for the host with a block of ``std::thread``\\ s
  (``test_kernels_rows._kernels``, one g++ build for every case) and run with one block per
  output group and with the reduction split over three blocks (the partials combined by the
  last), against NumPy's ``argmax``/``argmin`` (the first index of the best, the first NaN).
* A middle axis before a few kept elements (``(2, 3, 5, 4)`` over axis 1: lanes 20 elements
  apart) is declined as :class:`~plax_cupy.codegen.UnfusedArgReduction`: the emitter runs it
  as its coalesced kernel-table kernel after the rest of its cluster.
* NVRTC compiles the kernels without a warning (where NVRTC is available).
* On the simulated GPU (this file again in a child process): ``argmax(x * w + b, axis=-1)``
  and ``random.categorical`` (both threefry modes) are one launch, values equal to the NumPy
  backend's; the uncoalesced middle axis is two (the cluster, then the rows kernel); a reader
  of the index after the argmax is its epilogue, in its kernel (test_codegen_epilogues.py).
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
from test_kernels_rows import _kernels, needs_cxx20
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu
from plax_cupy import codegen

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, BF16, np.float32,
                                np.float64)]
#: (shape, axis) of every layout: a rank-1 row, last axes, leading axes, middle axes before 8,
#: 4 and 33 kept elements (a warp on consecutive outputs), a short middle axis before 4 (a
#: warp's 4 consecutive outputs on each of 8 reduced lanes: whole rows)
LAYOUTS = [((37,), 0), ((5, 37), 1), ((37, 5), 0), ((3, 6, 8), 1), ((3, 6, 8), 2),
           ((2, 3, 5, 4), 2), ((2, 3, 5, 4), 3), ((2, 3, 5, 4), 0), ((3, 40, 33), 1),
           ((2, 9, 4), 1)]
#: the CPU-side tests run once, not again in the simulated GPU's child process
cpu_side = pytest.mark.skipif(SIMULATED, reason="checked in the parent process")
INDEX_DTYPES = [np.dtype(t) for t in (np.int32, np.int8, np.uint8, np.int16, np.int64, np.uint32)]


def _cases():
    """``(dtype, kind, shape, axis, index_dtype)``: every dtype in both kinds over two layouts
    (in turn: every layout meets several dtypes, floats and integers)."""
    cases = []
    for i, dtype in enumerate(DTYPES):
        layouts = [LAYOUTS[i % len(LAYOUTS)], LAYOUTS[(i + 4) % len(LAYOUTS)]]
        for j, (shape, axis) in enumerate(layouts):
            for kind in ("argmax", "argmin"):
                index = INDEX_DTYPES[(i + j) % len(INDEX_DTYPES)]
                if np.iinfo(index).max < shape[axis]:
                    index = np.dtype(np.int32)
                cases.append((dtype, kind, shape, axis, index))
    return cases


def _cluster(dtype, kind, shape, axis, index_dtype) -> Cluster:
    """``argmax(max(x, lo), axis)`` (or argmin) as one cluster over ``shape``."""
    x, lo = Var(aval(shape, dtype)), Var(aval(shape, dtype))
    best = make_eqn(lax.max_p, [x, lo])
    prim = lax.argmax_p if kind == "argmax" else lax.argmin_p
    arg = make_eqn(prim, [best.outvars[0]], axes=(axis,), index_dtype=index_dtype)
    return Cluster([best, arg], tuple(shape), [x, lo], [arg.outvars[0]])


def _operand(rng, shape, dtype) -> np.ndarray:
    """Few distinct values (ties everywhere); for floats NaNs (often several in a row) and
    signed zeros; the first slice along every axis all equal."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.3
    base = rng.integers(0 if dtype.kind == "u" else -2, 3, size=shape).astype(np.float64)
    if dtype.kind == "f" or dtype == BF16:
        base[rng.random(shape) < 0.08] = np.nan
        base[(base == 0) & (rng.random(shape) < 0.5)] = -0.0
    base[(0,) * (len(shape) - 1)] = 1.0
    return base.astype(dtype)


def _lowest(dtype):
    if dtype == np.bool_:
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _want(x, kind, axis, index_dtype):
    ref = x.astype(np.float32) if x.dtype == BF16 else x
    got = np.argmax(ref, axis=axis) if kind == "argmax" else np.argmin(ref, axis=axis)
    return got.astype(index_dtype)


def _fused_plans():
    return [(case, codegen.plan_cluster(_cluster(*case))) for case in _cases()
            if codegen.reads_coalesced(case[2], (case[3],))]


@cpu_side
def test_an_uncoalesced_middle_axis_is_declined_and_layouts_put_outputs_on_a_warp():
    # lanes 20 elements apart: the kernel-table kernel reads such columns coalesced
    with pytest.raises(codegen.UnfusedArgReduction, match="uncoalesced"):
        codegen.plan_cluster(_cluster(np.dtype(np.float32), "argmax", (2, 3, 5, 4), 1,
                                      np.dtype(np.int32)))
    assert codegen.reduction_layout((3, 6, 8), (1,)) == (8, True)
    assert codegen.reduction_layout((3, 40, 33), (1,)) == (32, True)
    assert codegen.reduction_layout((2, 3, 5, 4), (1,))[1] is False
    assert codegen.reduction_layout((2, 9, 4), (1,)) == (4, True)
    # a short middle axis: the threads of an output already read whole rows (32 of them a block)
    assert codegen.reduction_layout((2, 3, 5, 4), (2,)) == (32, False)
    assert all(codegen.reads_coalesced(shape, (axis,)) for shape, axis in LAYOUTS)
    plan = codegen.plan_cluster(_cluster(np.dtype(np.float16), "argmin", (5, 37), 1,
                                         np.dtype(np.int8)))
    (j, red), = plan.reductions
    assert plan.entry == ("plax_reduce",) and red.kind == "argmin"
    assert red.acc_ctype == "plax_arg_float_int" and red.partial_items == 1
    assert codegen.ArgReduction("argmax", np.float64, np.int64, 2 ** 31).partial_items == 2


@cpu_side
@needs_cxx20
def test_fused_arg_reductions_match_numpy_with_a_block_of_threads(tmp_path):
    plans = _fused_plans()
    source, suffixes = batch_source([plan.source for _, plan in plans])
    # (the device kernels, not the serial host drivers: their `#ifndef PLAX_HOST` lifted)
    source = source.replace('#ifndef PLAX_HOST\nextern "C" __global__ void plax_reduce_k',
                            '#if 1\nextern "C" __global__ void plax_reduce_k')
    run = _kernels(tmp_path, source, preamble=False)
    rng = np.random.default_rng(24)
    failures = []
    for ((dtype, kind, shape, axis, index_dtype), plan), suffix in zip(plans, suffixes):
        x = _operand(rng, shape, dtype)
        lo = np.full(shape, _lowest(dtype), dtype)
        want = _want(x, kind, axis, index_dtype).reshape(-1)
        (_, red), = plan.reductions
        groups = -(-plan.n_out // plan.outputs_per_block)
        for bpo in (1, 3):   # one block per group, and a split finished by the last block
            out = np.full(plan.n_out, 77, index_dtype)
            partials = np.zeros(plan.n_out * bpo * red.partial_items, red.partial_dtype)
            done = np.zeros(plan.n_out, np.uint64)
            bits = [a.view(np.uint16) if a.dtype == BF16 else a for a in (x, lo)]
            run["plax_reduce" + suffix](bpo * min(groups, 2), 32, *bits, partials, out,
                                        plan.n_out, plan.n_red, bpo, done, 5)
            if not np.array_equal(out, want) or done.any():
                failures.append((dtype.name, kind, shape, axis, index_dtype.name, bpo, out, want))
    assert not failures, failures[:3]
    assert len(plans) >= 50


@cpu_side
@requires_nvrtc
def test_fused_arg_reductions_compile_with_nvrtc_without_warnings():
    from plax_cupy import nvrtc
    plans = [plan for _, plan in _fused_plans()]
    source, _ = batch_source([plan.source for plan in plans[::3]])
    ptx = nvrtc.compile_ptx(source, "arg_reductions.cu")   # (a warning is an error)
    assert ptx.count(".entry plax_reduce") == len(plans[::3])


# ---------------------------------------------------------------- on the simulated GPU

@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=5)   # (this one and the CPU-side tests skip there)


def _put(x):
    import plax
    return plax.device_put(x, plax.devices("gpu")[0])


def _launches(f, *args):
    import plax
    import plax_cupy
    plax.block_until_ready(f(*args))
    with plax_cupy.count() as c:
        out = plax.block_until_ready(f(*args))
    assert c.host_fallbacks == 0, c.fallbacks
    return c.launches, np.asarray(out)


@on_simulated_gpu
def test_argmax_of_an_affine_map_is_one_kernel(monkeypatch):
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    w = rng.standard_normal(70).astype(np.float32)
    b = np.round(rng.standard_normal(70), 1).astype(np.float32)
    x[3] = 0.0            # a row of ties: b decides, its first maximum
    x[4, 9] = np.nan      # a NaN wins
    for axis in (-1, 0):
        f = plax.jit(lambda x, w, b: jnp.argmax(x * w + b, axis=axis))
        launches, got = _launches(f, _put(x), _put(w), _put(b))
        want = np.asarray(plax.jit(f, backend="numpy")(x, w, b))
        assert launches == 1 and np.array_equal(got, want), (axis, launches)


@on_simulated_gpu
@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_categorical_is_one_kernel(partitionable, monkeypatch):
    import plax
    from plax import random
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", partitionable)
    try:
        logits = np.log(np.arange(1, 13, dtype=np.float32)).reshape(3, 4)
        key = random.PRNGKey(7)
        f = plax.jit(lambda k, l: random.categorical(k, l, shape=(6, 3)))
        launches, got = _launches(f, _put(key), _put(logits))
        want = np.asarray(plax.jit(f, backend="numpy")(key, logits))
    finally:
        plax.config.update("jax_threefry_partitionable", saved)
    assert launches == 1 and np.array_equal(got, want), launches


@on_simulated_gpu
def test_uncoalesced_middle_axis_runs_apart_and_a_reader_of_the_index_is_its_epilogue(monkeypatch):
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    rng = np.random.default_rng(6)
    x = np.round(rng.standard_normal((2, 30, 5)), 1).astype(np.float32)
    f = plax.jit(lambda x: (jnp.argmin(jnp.exp(x) - 1.0, axis=1), jnp.sin(x)))
    launches, _ = _launches(lambda x: f(x)[0], _put(x))
    got = [np.asarray(v) for v in f(_put(x))]
    want = [np.asarray(v) for v in plax.jit(f, backend="numpy")(x)]
    assert launches == 2 and np.array_equal(got[0], want[0])   # the cluster, then the rows kernel
    np.testing.assert_allclose(got[1], want[1], rtol=2e-6)
    g = plax.jit(lambda x: jnp.argmax(x * 2.0, axis=1) * 3 + 1)
    launches, got = _launches(g, _put(x[0]))
    assert launches == 1 and np.array_equal(got, np.asarray(plax.jit(g, backend="numpy")(x[0])))


@cpu_side
def test_a_lone_iota_joins_a_horizontal_group_only_where_index_fusion_is_asked():
    """An ``iota`` and an independent elementwise unit (``random.permutation``'s iota and its
    keys: ``test_kernels_b_random.py`` counts its launches): with ``index`` (the CuPy
    generator's options) one multi-tensor group, else apart."""
    import plax
    from plax.lowering import FusionOptions, HorizontalGroup, find_clusters
    jaxpr = plax.make_jaxpr(lambda x: (lax.iota(np.int32, 9), x * 2.0))(np.ones(4, np.float32)).jaxpr
    grouped = list(find_clusters(jaxpr, FusionOptions(horizontal=1 << 10, index=True)))
    assert len(grouped) == 1 and isinstance(grouped[0], HorizontalGroup), grouped
    assert [m.eqns[0].primitive.name for m in grouped[0].members] == ["iota", "mul"]
    apart = list(find_clusters(jaxpr, FusionOptions(horizontal=1 << 10)))
    assert not any(isinstance(u, HorizontalGroup) for u in apart), apart


@on_simulated_gpu
def test_an_argmax_beside_a_reduction_is_fused_with_it_or_runs_apart(monkeypatch):
    """Beside a reduction of the same axis, one kernel of two reductions; beside one of other
    axes (which one kernel cannot take), the rest of the cluster is one kernel and the argmax
    its row kernel (two launches, not a launch per equation)."""
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = np.round(np.random.default_rng(7).standard_normal((6, 40)), 1).astype(np.float32)
    for axes, want_launches in (((1, 1), 1), ((0, 1), 2)):
        f = plax.jit(lambda x: (jnp.max(jnp.abs(x) * 2.0, axis=axes[0]),
                                jnp.argmax(jnp.abs(x) * 2.0, axis=axes[1])))
        launches, _ = _launches(lambda x: f(x)[1], _put(x))
        got = [np.asarray(v) for v in f(_put(x))]
        want = [np.asarray(v) for v in plax.jit(f, backend="numpy")(x)]
        assert launches == want_launches, (axes, launches)
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), axes


@on_simulated_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_long_argmax_split_over_blocks_is_one_launch(dtype, monkeypatch):
    """Few long rows: the reduction split over several blocks a group (the pairs' partials, 8
    and 16 bytes, combined by the last block), still one launch; ties and a NaN as NumPy."""
    import plax
    from plax import numpy as jnp
    from plax_cupy import codegen
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    saved = plax.config.read("jax_enable_x64")
    plax.config.update("jax_enable_x64", dtype == "float64")
    try:
        x = np.round(np.random.default_rng(8).standard_normal((3, 30000)), 1).astype(dtype)
        x[1, 20000:] = 9.0          # the maximum tied over a third of the row, across blocks
        x[2, [25000, 29000]] = np.nan
        assert codegen.reduction_launch(3, 30000, outputs_per_block=1)[2] > 1   # (split)
        for f in (lambda x: jnp.argmax(x - 1.0, axis=1), lambda x: jnp.argmin(x - 1.0, axis=1),
                  lambda x: jnp.argmax(x.T * 2.0, axis=0)):
            g = plax.jit(f)
            launches, got = _launches(g, _put(x))
            want = np.asarray(plax.jit(f, backend="numpy")(x))
            assert launches == 1 and np.array_equal(got, want), (launches, got, want)
    finally:
        plax.config.update("jax_enable_x64", saved)

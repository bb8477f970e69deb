"""The first tier of a hot elementwise kernel (:mod:`plax_numba.llvm_tier`): LLVM IR built
with llvmlite alone, in this process. Its kernel gives numba's kernel's bits and the NumPy
backend's values; a hot step runs it until numba's kernel arrives; a failed build warns once
and the reference path keeps running. No timing is asserted.

One numba compilation (the module fixture's, in this process) is shared by the tests."""
from __future__ import annotations

import math
import threading
import time
import warnings

import numpy as np
import pytest

import plax
from plax import lax
from plax.core.jaxpr import Literal
from plax.lowering import PlaxFallbackWarning

from llvm_tier_util import cluster_kernels, numba_entry, only_cluster

N = 1 << 16  # wide enough for numba's parallel kernel (codegen.PARALLEL_MIN)


def _program(x, y):
    """Everything the first tier compiles, in one cluster (no nested jit), each result one
    or two operations deep (compared elementwise with the NumPy backend's)."""
    pos = lax.gt(x, 0.0)
    selu = lax.mul(1.05, lax.select_n(pos, lax.sub(lax.mul(1.67, lax.exp(x)), 1.67), x))
    ratio = lax.div(lax.sqrt(lax.abs(y)), lax.neg(x))
    either = lax.select_n(lax.le(y, 2.5), lax.convert_element_type(lax.ne(x, y), np.float32),
                          lax.tanh(y))
    return (selu, lax.logistic(x), lax.mul(lax.max(x, y), lax.min(x, y)), ratio,
            lax.integer_pow(y, 3), lax.integer_pow(x, -2), either, lax.eq(x, y), lax.square(x))


def _inputs():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(N) * 30).astype(np.float32)
    y = (rng.standard_normal(N) * 4).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 88.7, 89.5,
                         -103.9, -110.0, 9.2, -9.2, 3e38], np.float32)
    x[:len(specials)] = specials
    y[:len(specials)] = specials[::-1]
    y[100:110] = x[100:110]  # some equal pairs
    return x, y


def _only_cluster(fn, *args):
    jaxpr, cluster = only_cluster(fn, *args)
    assert len(cluster.eqns) == len(jaxpr.eqns)
    return jaxpr, cluster


def _call(function, jaxpr, cluster, plan, *values):
    """Calls a kernel entry point as the step's wrapper does: inputs (scalars unboxed), the
    outputs it writes, ``n``."""
    env = dict(zip(map(id, jaxpr.invars), values))
    args = []
    for atom, t in zip(cluster.inputs, plan.arg_types):
        value = atom.val if isinstance(atom, Literal) else env[id(atom)]
        args.append(np.asarray(value, t[1])[()] if t[0] == "scalar"
                    else np.ascontiguousarray(value).reshape(-1))
    n = math.prod(cluster.shape)
    outs = [np.empty(n, v.aval.dtype) for v in cluster.outputs]
    function(*args, *outs, n)
    order = [next(i for i, v in enumerate(cluster.outputs) if v is o) for o in jaxpr.outvars]
    return [outs[i] for i in order]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The program's cluster, its numba kernel (compiled here, once) and its first tier."""
    x, y = _inputs()
    jaxpr, cluster = _only_cluster(_program, x, y)
    plan, function, numba_kernel = cluster_kernels(cluster, tmp_path_factory.mktemp("kernels"))
    assert plan.out_params
    return dict(x=x, y=y, jaxpr=jaxpr, cluster=cluster, plan=plan, function=function,
                numba_entry=numba_kernel)


def test_first_tier_gives_numbas_bits_and_the_numpy_backends_values(built):
    b = built
    ours = _call(b["function"], b["jaxpr"], b["cluster"], b["plan"], b["x"], b["y"])
    numbas = _call(b["numba_entry"], b["jaxpr"], b["cluster"], b["plan"], b["x"], b["y"])
    for mine, theirs in zip(ours, numbas):
        assert mine.dtype == theirs.dtype
        np.testing.assert_array_equal(mine.view(np.uint8), theirs.view(np.uint8))
    reference = [np.asarray(r) for r in plax.jit(_program, backend="numpy")(b["x"], b["y"])]
    _close_to_numpy(ours, reference)


def _close_to_numpy(ours: list, reference: list) -> None:
    """exp/tanh/logistic are numba's float32 forms, within 5 ulps of NumPy's; selu's
    ``1.67 exp(x) - 1.67`` cancels near 0, so its error there is absolute (a few ulps of
    1.67)."""
    for k, (mine, want) in enumerate(zip(ours, reference)):
        if want.dtype == np.bool_:
            np.testing.assert_array_equal(mine, want)
        else:
            np.testing.assert_allclose(mine, want, rtol=3e-6, atol=1e-6 if k == 0 else 1e-37)
            np.testing.assert_array_equal(np.isnan(mine), np.isnan(want))
            np.testing.assert_array_equal(np.isnan(mine), np.isnan(want))


def test_arithmetic_only_kernel_equals_the_numpy_backend_bit_for_bit():
    from plax_numba import codegen, llvm_tier

    def relu_mix(x, y):  # correctly rounded operations only
        r = lax.max(x, 0.0)
        return lax.add(lax.div(lax.mul(r, y), lax.sub(y, 0.5)),
                       lax.sqrt(lax.abs(lax.min(x, y))))
    x, y = _inputs()
    jaxpr, cluster = _only_cluster(relu_mix, x, y)
    plan = codegen.plan_cluster(cluster, preallocate=True)
    function = llvm_tier.build(llvm_tier.plan(cluster, plan), plan.primitives, "<test>")
    (ours,) = _call(function, jaxpr, cluster, plan, x, y)
    want = np.asarray(plax.jit(relu_mix, backend="numpy")(x, y))
    np.testing.assert_array_equal(ours.view(np.uint32), want.view(np.uint32))


def test_wrong_arguments_raise_type_error(built):
    b = built
    x64 = b["x"].astype(np.float64)
    with pytest.raises(TypeError, match="first-tier kernel was called with arguments"):
        _call(b["function"], b["jaxpr"], b["cluster"], b["plan"], x64, b["y"])
    with pytest.raises(TypeError, match="first-tier kernel"):
        _call(b["function"], b["jaxpr"], b["cluster"], b["plan"], b["x"][:-8], b["y"][:-8])


def test_what_it_does_not_compile_is_declined():
    from plax_numba import codegen, llvm_tier
    x = np.ones(N, np.float32)
    _, cluster = _only_cluster(lambda x: lax.mul(lax.cos(x), 2.0), x)
    assert llvm_tier.plan(cluster, codegen.plan_cluster(cluster, preallocate=True)) is None
    assert any("cos" in reason for reason in llvm_tier.declined)


def _nested(x, b, c):
    """Broadcasts along either axis (one from a size-1 axis) and reductions over some axes
    and over all: the loop nest and accumulators of a nested kernel."""
    h = lax.tanh(lax.add(x, lax.broadcast_in_dim(b, x.shape, (1,))))
    shifted = lax.sub(x, lax.broadcast_in_dim(c, x.shape, (0, 1)))
    return (h, lax.reduce_sum_p.bind(lax.mul(h, h), axes=(0,)),
            lax.reduce_max_p.bind(h, axes=(1,)), lax.reduce_sum_p.bind(lax.exp(x), axes=(0, 1)),
            lax.reduce_min_p.bind(shifted, axes=(1,)), lax.reduce_prod_p.bind(
                lax.add(lax.mul(h, 0.01), 1.0), axes=(0,)))


def test_a_nested_kernel_with_reductions_gives_numbas_bits(tmp_path):
    from plax_numba import codegen, llvm_tier
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    x[5, 7], x[9, 1] = np.nan, -np.inf
    b = rng.standard_normal(48).astype(np.float32)
    c = rng.standard_normal((64, 1)).astype(np.float32)
    jaxpr, cluster = _only_cluster(_nested, x, b, c)
    plan = codegen.plan_cluster(cluster, preallocate=True)
    assert not plan.out_params and "for i1 in range" in plan.source  # numba's nested form
    first = llvm_tier.plan(cluster, plan)
    assert first is not None, llvm_tier.declined
    ours = llvm_tier.build(first, plan.primitives, "<test>")
    numba_kernel = numba_entry(plan, tmp_path)
    env = {id(v): a for v, a in zip(jaxpr.invars, (x, b, c))}
    args = [np.asarray(atom.val, t[1])[()] if t[0] == "scalar" else
            np.ascontiguousarray(atom.val if isinstance(atom, Literal) else env[id(atom)])
            for atom, t in zip(cluster.inputs, plan.arg_types)] + list(x.shape)
    mine, theirs = ours(*args), numba_kernel(*args)
    order = [next(i for i, v in enumerate(cluster.outputs) if v is o) for o in jaxpr.outvars]
    reference = plax.jit(_nested, backend="numpy")(x, b, c)
    for k, want in zip(order, reference):
        got = np.atleast_1d(mine[k])
        # (numba boxes a float32 scalar result as a Python float: exact, cast back as the
        # step's wrapper does)
        numbas = np.atleast_1d(np.asarray(theirs[k], got.dtype))
        np.testing.assert_array_equal(got.view(np.uint8), numbas.view(np.uint8))
        np.testing.assert_allclose(got, np.atleast_1d(want), rtol=2e-5)


@pytest.fixture
def tiered_gated(monkeypatch, tmp_path):
    """Tiering after one run, numba's compilation in this process's background thread
    (``PLAX_NUMBA_WORKERS=0``) held until the test releases it; it then hands back the
    first-tier kernel itself (no numba compilation in these tests)."""
    from plax_numba import cache, llvm_tier, native_loader
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_FIRST_TIER", "1")  # (the default; conftest turns it off)
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "0")
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1")
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    release = threading.Event()
    built_here: list = []
    real_build = llvm_tier.build

    def build(first, *args):
        function = real_build(first, *args)
        built_here.append(first)
        return function

    def compile_kernel(text, arg_types):
        release.wait(60)
        return native_loader.NativeKernel(
            built_here[-1].function if built_here and built_here[-1].function
            else _reference_kernel, "<test>")
    monkeypatch.setattr(llvm_tier, "build", build)
    monkeypatch.setattr(cache, "compile_kernel", compile_kernel)
    yield release, built_here
    release.set()
    from plax_numba import tiered
    assert tiered.wait_idle(timeout=60)


def _reference_kernel(*args):
    raise AssertionError("the final kernel of a failed first tier is never called here")


def _steps(f) -> list:
    (entry,) = f._cache.values()
    glob = entry.executable.__globals__
    return [v.__globals__ for k, v in glob.items()
            if k.startswith("_f") and hasattr(v, "__globals__") and "_ready" in v.__globals__]


def test_a_hot_step_runs_the_first_tier_until_numbas_kernel_arrives(tiered_gated):
    from plax_numba import llvm_tier
    release, built_here = tiered_gated
    x, y = _inputs()
    f = plax.jit(_program, backend="numba")
    want = [np.asarray(r) for r in plax.jit(_program, backend="numpy")(x, y)]
    before = dict(llvm_tier.stats)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x, y)  # hot at once
        deadline = time.monotonic() + 60
        while not all(ns["_ready"] for ns in _steps(f)):
            assert time.monotonic() < deadline, "the first tier never came into use"
            f(x, y)
            time.sleep(0.005)
        (ns,) = _steps(f)
        assert ns["_kernel"] is built_here[-1].function  # numba's kernel is still held
        got = [np.asarray(r) for r in f(x, y)]
    assert not [w for w in caught if issubclass(w.category, PlaxFallbackWarning)]
    assert llvm_tier.stats["built"] == before["built"] + 1
    assert llvm_tier.stats["failed"] == before["failed"]
    assert "define ptr @plax_first_" in built_here[-1].ir
    _close_to_numpy(got, want)


def test_a_failed_first_tier_warns_once_and_the_reference_path_keeps_running(
        tiered_gated, monkeypatch):
    from plax_numba import llvm_tier, native_loader

    def broken(text, entry, **options):
        raise RuntimeError("LLVM refused (test)")
    monkeypatch.setattr(native_loader, "link_ir", broken)
    x, y = _inputs()
    f = plax.jit(lambda x, y: _program(x, y), backend="numba")  # (a program of its own)
    want = [np.asarray(r) for r in plax.jit(_program, backend="numpy")(x, y)]
    failed = llvm_tier.stats["failed"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [[np.asarray(r) for r in f(x, y)]]
        deadline = time.monotonic() + 60
        while llvm_tier.stats["failed"] == failed:
            assert time.monotonic() < deadline, "the first tier's build never ended"
            time.sleep(0.005)
        outs += [[np.asarray(r) for r in f(x, y)] for _ in range(3)]
        (ns,) = _steps(f)
        assert not ns["_ready"]  # the reference path, until numba's kernel
    messages = [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)]
    assert len(messages) == 1 and "first-tier" in messages[0] and "LLVM refused" in messages[0]
    for got in outs:  # the reference kernels: the NumPy backend's values exactly
        for mine, theirs in zip(got, want):
            np.testing.assert_array_equal(mine, theirs)


def test_machine_code_cached_on_disk_is_linked_without_llvms_passes(tmp_path, monkeypatch):
    """``native_loader.link_ir`` with a ``cache_path``: the first link writes the machine code
    there, a later one links that file without running LLVM's passes, and both kernels give
    the same results."""
    from plax_numba import codegen, llvm_tier, native_loader
    x, y = _inputs()
    jaxpr, cluster = _only_cluster(lambda x, y: lax.add(lax.mul(x, 3.0), y), x, y)
    plan = codegen.plan_cluster(cluster, preallocate=True, parallel=False)
    first = llvm_tier.plan(cluster, plan)
    path = str(tmp_path / "first_tier" / "kernel.o")
    made = native_loader.link_ir(first.ir, first.entry, cache_path=path)
    assert (tmp_path / "first_tier" / "kernel.o").stat().st_size > 0
    llvm = native_loader._ready[0]

    def no_passes(*args, **kwargs):
        raise AssertionError("LLVM's passes ran for cached machine code")
    monkeypatch.setattr(llvm, "create_pass_builder", no_passes)
    loaded = native_loader.link_ir(first.ir, first.entry, cache_path=path)
    (want,) = _call(made, jaxpr, cluster, plan, x, y)
    (got,) = _call(loaded, jaxpr, cluster, plan, x, y)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    with np.errstate(over="ignore"):  # (x holds 3e38)
        np.testing.assert_array_equal(want, x * np.float32(3.0) + y)

"""The CUDA code generator, checked without a GPU.

* every fusible primitive on every dtype it takes (and its parameter variants: rounding
  methods, exponents, conversion and bit-cast targets, broadcast maps, reduction axes) gets a
  kernel, and NVRTC compiles all of them without an error or a warning;
* the same source, built for the host with ``-DPLAX_HOST`` (g++), computes what the NumPy
  backend computes: integers and booleans exactly, floats to a few ulps (C library vs NumPy);
* random fused programs (the conformance kit's generator: elementwise chains over float32,
  int32 and bool with broadcasting, literals, ``where``, casts and reductions) are split into
  clusters by the shared fusion pass; each cluster's kernel compiles with NVRTC and the whole
  program, run cluster by cluster on the host, matches the NumPy backend;
* ``threefry2x32``: NVRTC compiles the kernel, and on the host its bits equal the reference
  kernel's for every combination of scalar and array operands.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plax
from plax import lax

from gpu_env import requires_nvrtc
from kernel_source_util import (COMPLEX_DECLINED, HAVE_CXX, batch_source, clusters_of,
                                inline_calls, operands_for, primitive_cases, reference, run_host,
                                assert_matches, groups_of, run_group_host, units_of)
from plax_cupy import codegen

needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++) for the host check")

_CASES = primitive_cases()


def _plans():
    plans, declined = [], []
    for cid, eqn, supported in _CASES:
        try:
            plans.append((cid, eqn, codegen.plan_equation(eqn)))
        except codegen.Unsupported as why:
            declined.append((cid, supported, str(why)))
    return plans, declined


_PLANS, _DECLINED = _plans()


def test_generator_covers_every_fusible_primitive_and_dtype():
    """Nothing is declined but the primitives listed as having no device form yet: every
    fusible primitive on every dtype it takes, float16, bfloat16 and complex included
    (digamma, the scaled Bessel functions and the complex inverse trigonometric/hyperbolic
    functions with the generator's own forms)."""
    wrongly = [(cid, why) for cid, supported, why in _DECLINED if supported]
    assert not wrongly, wrongly
    names = {eqn.primitive.name for _, eqn, _ in _PLANS}
    from plax.lowering import fusion
    # (index equations, iota, fuse only where an emitter asks: the CUDA generator does, so it
    # covers them; threefry2x32, several results, is checked in clusters below; arg-reductions
    # fuse only in clusters, a lone one being the row kernel's (test_codegen_arg_reductions);
    # cumulative ops only for an emitter that opts in, which the CUDA one does not;
    # structural equations only inside a cluster reading through them, test_codegen_structural)
    fusible = {p.name for p, kind in fusion.fusible_primitives().items()
               if not p.multiple_results
               and kind not in (fusion.ARG_REDUCTION, fusion.CUMULATIVE, fusion.STRUCTURAL)}
    assert "iota" in names
    assert fusible - codegen.WITHOUT_DEVICE_FORM == names, fusible ^ names
    assert len(_PLANS) >= 1150, len(_PLANS)
    dtypes = {str(v.aval.dtype) for _, eqn, _ in _PLANS for v in eqn.invars}
    assert dtypes == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                      "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
                      "complex128"}
    declined = {cid.split("-")[0] for cid, _, _ in _DECLINED}
    cased = {cid.split("-")[0] for cid, _, _ in _CASES}
    assert declined == COMPLEX_DECLINED | (codegen.WITHOUT_DEVICE_FORM & cased), declined


@requires_nvrtc
def test_every_primitive_kernel_compiles_with_nvrtc():
    from plax_cupy import nvrtc
    source, _ = batch_source([plan.source for _, _, plan in _PLANS])
    ptx = nvrtc.compile_ptx(source, "primitives.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
    assert ptx.count(".entry") == sum(len(p.entry) for _, _, p in _PLANS)


@needs_cxx
def test_every_primitive_kernel_computes_the_reference_values_on_the_host():
    from plax_cupy import nvrtc
    source, suffixes = batch_source([plan.source for _, _, plan in _PLANS])
    lib = nvrtc.compile_host(source)
    rng = np.random.default_rng(0)
    failures = []
    for (cid, eqn, plan), suffix in zip(_PLANS, suffixes):
        ops = operands_for(eqn, rng)
        got = run_host(plan, getattr(lib, "plax_host" + suffix), ops)[0]
        try:
            assert_matches(got, reference(eqn, ops), eqn.primitive.name, None)
        except AssertionError as err:
            failures.append(f"{cid}: {str(err)[:400]}")
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} failures)"


# ---------------------------------------------------------------- random fused programs

def _program_strategy():
    from plax.testing.conformance.test_fusion import programs
    return programs()


def _program_operands(prog, seed):
    rng = np.random.default_rng(seed)
    out = []
    for dtype, kind in prog.inputs:
        shape = prog.shape(kind)
        if dtype == "float32":
            out.append((rng.integers(-12, 13, size=shape) / 4).astype(np.float32))
        elif dtype == "int32":
            out.append(rng.integers(-5, 6, size=shape).astype(np.int32))
        else:
            out.append(rng.random(shape) < 0.5)
    return out


def _run_program_on_host(jaxpr, consts, operands, lib, plans):
    """Evaluates ``jaxpr``: clusters with the host build of their kernels, other equations with
    the NumPy backend's kernels."""
    import plax_numpy
    from plax.core.jaxpr import Literal
    from plax.lowering import Cluster
    impls = plax_numpy.impls()
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, operands))

    def read(v):
        return np.asarray(v.val, v.aval.dtype) if isinstance(v, Literal) else env[v]

    def run_eqn(eqn):
        with np.errstate(all="ignore"):
            out = impls[eqn.primitive](*[read(v) for v in eqn.invars], **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, [np.asarray(o) for o in outs]))

    k = 0
    for unit in units_of(jaxpr):  # (clusters in clusters_of's order)
        if isinstance(unit, Cluster):
            plan, suffix = plans[k]
            k += 1
            if plan is None:   # (a row-local cluster: its values are checked in
                for eqn in unit.eqns:   # test_codegen_rows_local; here its equations)
                    run_eqn(eqn)
                continue
            outs = run_host(plan, getattr(lib, "plax_host" + suffix), [read(v) for v in unit.inputs])
            env.update(zip(unit.outputs, outs))
        else:
            run_eqn(unit)
    return [read(v) for v in jaxpr.outvars]


_SETTINGS = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow])


@requires_nvrtc
@needs_cxx
@_SETTINGS
@given(prog=_program_strategy(), seed=st.integers(0, 2**16))
def test_random_fused_programs_compile_and_compute_the_reference(prog, seed):
    from plax.testing.conformance.test_fusion import run_plax
    from plax_cupy import nvrtc
    from plax_cupy.codegen_rows_local import plan_rows
    operands = _program_operands(prog, seed)
    closed = plax.make_jaxpr(lambda *a: run_plax(prog, a))(*operands)
    jaxpr = inline_calls(closed.jaxpr)
    clusters = clusters_of(jaxpr)
    plans, rows = [], []
    for c in clusters:
        if c.row_axes:   # (a block per row: compiled here, its values in test_codegen_rows_local)
            rows.append(plan_rows(c))
            plans.append("rows")
            continue
        try:
            plans.append(codegen.plan_cluster(c))
        except codegen.Unsupported as why:
            # only reductions over different axes in one cluster are declined here
            assert "different axes" in str(why), why
            plans.append(None)
    for plan in rows:
        nvrtc.compile_ptx(plan.source, "rows.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
    usable = [p for p in plans if p is not None and p != "rows"]
    if not usable:
        return
    source, suffixes = batch_source([p.source for p in usable])
    nvrtc.compile_ptx(source, "program.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
    if None in plans:
        return  # the driver would split the declined cluster; values checked elsewhere
    lib = nvrtc.compile_host(source)
    suffixes = iter(suffixes)
    got = _run_program_on_host(jaxpr, closed.consts, operands, lib,
                               [(None, None) if p == "rows" else (p, next(suffixes)) for p in plans])
    want = plax.jit(lambda *a: run_plax(prog, a), backend="numpy")(*operands)
    for g, w in zip(got, want):
        w = np.asarray(w)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


@requires_nvrtc
@needs_cxx
def test_random_bits_are_one_cluster_with_their_counter_and_hash():
    """Random bits made uniform floats: ``iota`` (the counter, an expression of the element
    index), ``threefry2x32`` (both words in one pass), ``xor``, the shift/or to a float's
    mantissa, the bit cast and an affine map are one cluster; NVRTC compiles it and on the host
    its values are the NumPy backend's, bit for bit."""
    from plax import random
    from plax_cupy import nvrtc

    def uniform(k):
        bits = random.bits(k, (1000,))
        one_two = lax.bitcast_convert_type(lax.shift_right_logical(bits, np.uint32(9))
                                           | np.uint32(0x3F800000), np.float32)
        return (one_two - np.float32(1)) * np.float32(5) - np.float32(2)

    key = np.asarray(random.PRNGKey(7))
    closed = plax.make_jaxpr(uniform)(key)
    jaxpr = inline_calls(closed.jaxpr)
    big = [c for c in clusters_of(jaxpr) if c.shape == (1000,)]
    assert len(big) == 1, big
    names = [e.primitive.name for e in big[0].eqns]
    assert {"iota", "threefry2x32", "xor", "shift_right_logical", "bitcast_convert_type"} <= set(names), names
    assert "plax_threefry_elem(" in codegen.plan_cluster(big[0]).source
    plans = [codegen.plan_cluster(c) for c in clusters_of(jaxpr)]
    source, suffixes = batch_source([p.source for p in plans])
    nvrtc.compile_ptx(source, "random_bits.cu")
    lib = nvrtc.compile_host(source)
    got = _run_program_on_host(jaxpr, closed.consts, [key], lib, list(zip(plans, suffixes)))[0]
    want = plax.jit(uniform, backend="numpy")(key)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


@requires_nvrtc
@needs_cxx
def test_cluster_with_reductions_and_elementwise_outputs():
    """One cluster: a broadcast, an elementwise chain whose values leave the cluster, and two
    reductions over the same axis -- one partial-reduction kernel pair."""
    from plax_cupy import nvrtc

    def f(x, y):
        z = lax.mul(lax.exp(x), lax.broadcast_in_dim(y, (5, 300), (1,)))
        return z, lax.reduce_sum_p.bind(z, axes=(0,)), lax.reduce_max_p.bind(z, axes=(0,))

    x = np.linspace(-2, 2, 1500, dtype=np.float32).reshape(5, 300)
    y = np.linspace(0, 1, 300, dtype=np.float32)
    closed = plax.make_jaxpr(f)(x, y)
    (cluster,) = clusters_of(closed.jaxpr)
    plan = codegen.plan_cluster(cluster)
    assert plan.entry == ("plax_reduce",) and len(plan.reductions) == 2
    nvrtc.compile_ptx(plan.source)  # with the device optimiser: this is a launched shape
    lib = nvrtc.compile_host(plan.source)
    z, s, m = run_host(plan, lib.plax_host, [x, y])
    want = np.exp(x) * y
    np.testing.assert_allclose(z, want, rtol=1e-6)
    np.testing.assert_allclose(s, want.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(m, z.max(0))  # the max of the kernel's own values, exactly


@requires_nvrtc
@needs_cxx
def test_multi_tensor_kernel_compiles_and_computes_each_member():
    """An SGD update of three parameters of different shapes (and dtypes) plus an independent
    ``abs(z) * 2``: the lowering groups them (one :class:`plax.lowering.HorizontalGroup`), NVRTC
    compiles the multi-tensor kernel, and on the host each member's values are the NumPy
    backend's."""
    import plax.numpy as jnp
    from plax.core.jaxpr import Literal
    from plax_cupy import nvrtc

    def f(w, b, c, gw, gb, gc, z):
        return w - 0.5 * gw, b - 0.5 * gb, c - np.float64(0.5) * gc, jnp.abs(z) * 2.0

    rng = np.random.default_rng(0)
    with plax.config.override("jax_enable_x64", True):
        ops = [rng.normal(size=s).astype(d) for s, d in
               [((4, 3), np.float32), ((3,), np.float32), ((5,), np.float64)] * 2
               + [((2, 2), np.float32)]]
        closed = plax.make_jaxpr(f)(*ops)
        (group,) = groups_of(closed.jaxpr)
        assert [m.shape for m in group.members] == [(4, 3), (3,), (5,), (2, 2)]
        plan = codegen.plan_group(group.members)
        assert plan.entry == ("plax_multi",) and plan.offsets == [0, 12, 15, 20, 24]
        nvrtc.compile_ptx(plan.source, "multi.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
        lib = nvrtc.compile_host(plan.source)
        env = dict(zip(closed.jaxpr.invars, ops))
        got = run_group_host(plan, lib.plax_host, [
            [np.asarray(v.val) if isinstance(v, Literal) else env[v] for v in m.inputs]
            for m in group.members])
        want = plax.jit(f, backend="numpy")(*ops)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))


# ---------------------------------------------------------------- threefry2x32

@requires_nvrtc
def test_threefry_kernel_compiles_with_nvrtc():
    from plax_cupy import nvrtc
    ptx = nvrtc.compile_ptx(codegen.threefry_source(), "threefry.cu")
    assert ".entry plax_threefry2x32" in ptx


@needs_cxx
@pytest.mark.parametrize("scalars", [(True, True, False, False), (False, False, False, False),
                                     (True, True, True, False), (False, True, False, True)])
def test_threefry_bits_equal_the_reference(scalars):
    import ctypes

    import plax_numpy
    from plax_cupy import nvrtc
    lib = nvrtc.compile_host(codegen.threefry_source())
    rng = np.random.default_rng(1)
    n = 1000
    ops = [np.asarray(rng.integers(0, 2**32, size=() if s else (n,), dtype=np.uint32))
           for s in scalars]
    y0, y1 = np.empty(n, np.uint32), np.empty(n, np.uint32)
    flat = [np.ascontiguousarray(o.reshape(-1)) for o in ops]
    fn = lib.plax_threefry_host
    fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_longlong] * 5
    fn(*[o.ctypes.data for o in flat], y0.ctypes.data, y1.ctypes.data, n,
       *[0 if s else 1 for s in scalars])
    want = plax_numpy.impls()[lax.threefry2x32_p](*ops)
    np.testing.assert_array_equal(y0, np.broadcast_to(want[0], (n,)))
    np.testing.assert_array_equal(y1, np.broadcast_to(want[1], (n,)))


def test_threefry_known_answer_on_the_host():
    """Random123's known answer for Threefry-2x32 (20 rounds), key and counter all ones."""
    import ctypes
    if not HAVE_CXX:
        pytest.skip("no C++ compiler (g++) for the host check")
    from plax_cupy import nvrtc
    lib = nvrtc.compile_host(codegen.threefry_source())
    ones = np.array([0xFFFFFFFF], np.uint32)
    y0, y1 = np.empty(1, np.uint32), np.empty(1, np.uint32)
    fn = lib.plax_threefry_host
    fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_longlong] * 5
    fn(ones.ctypes.data, ones.ctypes.data, ones.ctypes.data, ones.ctypes.data,
       y0.ctypes.data, y1.ctypes.data, 1, 0, 0, 0, 0)
    assert (int(y0[0]), int(y1[0])) == (0x1CB996FC, 0xBB002BE7)


# ---------------------------------------------------------------- literals

@needs_cxx
def test_literals_are_exact():
    """Every constant the generator writes reads back bit for bit (hex floats, NaN and
    infinities by bit pattern, integer extremes)."""
    import ctypes
    from plax_cupy import nvrtc
    from plax_cupy.dtypes import ctype
    values = []
    for d in (np.float32, np.float64):
        for v in (0.1, -0.0, np.inf, -np.inf, np.nan, 1e-45 if d is np.float32 else 5e-324,
                  np.finfo(d).max, 1 / 3):
            values.append((np.asarray(v, d), d))
    for d in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(d)
        for v in (info.min, info.max, 0, 1):
            values.append((np.asarray(v, d), d))
    lines = [codegen.PREAMBLE]
    for k, (v, d) in enumerate(values):
        t = ctype(d)
        lines.append(f'extern "C" void lit{k}({t}* out) {{ *out = {codegen.c_literal(v, d)}; }}')
    lib = nvrtc.compile_host("\n".join(lines))
    for k, (v, d) in enumerate(values):
        out = np.zeros(1, d)
        fn = getattr(lib, f"lit{k}")
        fn.argtypes = [ctypes.c_void_p]
        fn(out.ctypes.data)
        assert out.view(np.uint8).tobytes() == np.asarray(v, d).reshape(1).view(np.uint8).tobytes(), (v, d)


@requires_nvrtc
def test_literals_compile_with_nvrtc():
    from plax_cupy import nvrtc
    from plax_cupy.dtypes import ctype
    lines = [codegen.PREAMBLE]
    for k, d in enumerate((np.float32, np.float64, np.int8, np.int64, np.uint64, np.uint8)):
        vals = [np.inf, np.nan, 0.1] if np.dtype(d).kind == "f" else [np.iinfo(d).min, np.iinfo(d).max]
        for j, v in enumerate(vals):
            lines.append(f'extern "C" __global__ void lit{k}_{j}({ctype(d)}* out) '
                         f'{{ *out = {codegen.c_literal(v, d)}; }}')
    nvrtc.compile_ptx("\n".join(lines), "literals.cu")

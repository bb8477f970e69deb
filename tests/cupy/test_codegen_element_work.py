"""Less work per element in generated kernels, checked without a GPU (the source's form,
NVRTC compiling it without a warning, its host build (g++) giving the NumPy backend's bits):

* a ``select_n`` whose cases own enough work is a branch computing only the selected case
  (``plax_cupy.codegen._branch_selects``);
* ``max``/``min`` with a literal that is not NaN skip that operand's NaN test
  (``codegen._max_min_of_a_number``).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import dtypes, lax
from plax import numpy as jnp
from plax.core.jaxpr import Literal

from gpu_env import NVRTC_PROBLEM
from kernel_source_util import HAVE_CXX, clusters_of, inline_calls, run_host
from plax_cupy import codegen

needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++) for the host check")


def _chain(v, c):
    """Nine multiply-adds: more equations than LAZY_SELECT_MIN_EQUATIONS (exact in float32
    for these operands, which the reference computes operation by operation too)."""
    for k in range(9):
        v = v * c + (k + 0.5)
    return v


def three_cases(x, k):
    shared = x * 1.5 + 0.25          # read by two cases: computed before the branch
    out_too = shared * 0.5 - x       # also a result of the program: computed before the branch
    c0 = _chain(x, 0.5)              # case 0's own work
    c1 = _chain(shared, -0.75)       # case 1's own work (on top of a shared value)
    c2 = out_too + shared            # case 2: little work
    return lax.select_n(k, c0, c1, c2), out_too


def two_cases(x):
    return jnp.where(x > 0.5, _chain(x, 0.25), _chain(x, -0.5) + 1.0)


def _plan(fn, *args):
    jaxpr = inline_calls(plax.make_jaxpr(fn)(*args).jaxpr)
    (cluster,) = clusters_of(jaxpr)
    return cluster, codegen.plan_cluster(cluster)


def _value(atom, env):
    """A cluster input's value: a literal's own (half-type literals are read from memory)."""
    return atom.val if isinstance(atom, Literal) else env[atom]


def _operands(dtype, n=257):
    rng = np.random.default_rng(3)
    x = (rng.integers(-64, 64, n) / 64).astype(dtype)   # few mantissa bits: exact chains
    k = rng.integers(0, 3, n).astype(np.int32)
    return x, k


def test_select_with_heavy_cases_becomes_a_branch():
    x, k = _operands(np.float32)
    _, plan = _plan(three_cases, x, k)
    src = plan.source
    body = src[src.index("void plax_elem("):]
    body = body[:body.index("\n}\n")]
    # an index select: case 0, case 1, then the last
    assert " == 0) {" in body and "} else if (" in body and " == 1) {" in body and "} else {" in body
    first_if = body.index("if (")
    # the shared value and the program's output are computed before the branch, each
    # case's chain inside its branch only
    assert body.count("* 1.5") + body.count("1.5f") <= 1
    lines = body.splitlines()
    at_if = next(j for j, line in enumerate(lines) if "if (" in line)
    assert any(line.startswith("  o") and "[i] =" in line for line in lines[:at_if]), lines[:at_if]
    inside = "\n".join(lines[at_if:])
    assert inside.count("const float") >= 2 * 18   # two chains of 9 multiply-adds moved in
    assert first_if > 0


def test_light_or_boolean_selects():
    # selu's where: its case owns 3 equations, kept an expression
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    _, plan = _plan(lambda v: 1.05 * jnp.where(v > 0, v, 1.67 * jnp.exp(v) - 1.67), x)
    assert "if (" not in plan.source[plan.source.index("void plax_elem("):]
    # a boolean predicate selects case 1 when true: its branch first
    _, plan = _plan(two_cases, x)
    body = plan.source[plan.source.index("void plax_elem("):]
    assert body.count("if (") == 1 and "} else {" in body


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.float16, dtypes.bfloat16], ids=str)
def test_branch_form_gives_the_numpy_backends_bits(dtype):
    from plax_cupy import nvrtc
    x, k = _operands(dtype)
    for fn, args in ((three_cases, (x, k)), (two_cases, (x,))):
        jaxpr = inline_calls(plax.make_jaxpr(fn)(*args).jaxpr)
        (cluster,) = clusters_of(jaxpr)
        plan = codegen.plan_cluster(cluster)
        lib = nvrtc.compile_host(plan.source)
        env = dict(zip(jaxpr.invars, args))
        got = dict(zip(cluster.outputs, run_host(plan, lib.plax_host,
                                                 [_value(a, env) for a in cluster.inputs])))
        want = plax.jit(fn, backend="numpy")(*args)
        want = want if isinstance(want, tuple) else (want,)
        for v, w in zip(jaxpr.outvars, want):
            np.testing.assert_array_equal(got[v].view(np.uint8), np.asarray(w).view(np.uint8))


def test_branch_form_compiles_with_nvrtc_without_warnings():
    if NVRTC_PROBLEM:
        pytest.skip(NVRTC_PROBLEM)
    from plax_cupy import nvrtc
    for dtype in (np.float32, np.float16):
        x, k = _operands(dtype)
        for fn, args in ((three_cases, (x, k)), (two_cases, (x,))):
            _, plan = _plan(fn, *args)
            assert ".entry plax_elementwise" in nvrtc.compile_ptx(plan.source)


@plax.jit
def _clamp_converted(lo, x):
    # (a jitted call's literal argument: inlined, its conversion is in the cluster, as
    # random.uniform's minval is)
    return lax.max(lax.convert_element_type(lo, np.float32), x)


def clamps(x):
    return (jnp.maximum(-0.5, x), jnp.minimum(x, 0.0), jnp.maximum(x, -0.0),
            jnp.minimum(np.float32(np.nan), x), jnp.maximum(x, jnp.float32(np.inf)),
            _clamp_converted(0.25, x), _clamp_converted(np.nan, x))


def test_max_min_with_a_number_literal_skip_its_nan_test():
    x = np.array([np.nan, -np.nan, 0.0, -0.0, -0.5, 0.5, -np.inf, np.inf, 1e-45, -3.0], np.float32)
    jaxpr = inline_calls(plax.make_jaxpr(clamps)(x).jaxpr)
    (cluster,) = clusters_of(jaxpr)
    plan = codegen.plan_cluster(cluster)
    body = plan.source[plan.source.index("void plax_elem("):]
    # (the NaN literal's min and the NaN's conversion's max keep their NaN tests)
    assert body.count("plax_max(") + body.count("plax_min(") == 2, body
    if HAVE_CXX:
        from plax_cupy import nvrtc
        lib = nvrtc.compile_host(plan.source)
        env = dict(zip(jaxpr.invars, (x,)))
        got = dict(zip(cluster.outputs, run_host(plan, lib.plax_host,
                                                 [_value(a, env) for a in cluster.inputs])))
        for v, w in zip(jaxpr.outvars, plax.jit(clamps, backend="numpy")(x)):
            w = np.asarray(w)
            same = (got[v].view(np.uint32) == w.view(np.uint32)) | (np.isnan(got[v]) & np.isnan(w))
            assert same.all(), (got[v], w)

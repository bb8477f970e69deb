"""Integer clusters in the first tier (:mod:`plax_numba.llvm_tier`, integer operations in
:mod:`plax_numba.llvm_tier_ints`): taken (not declined), and the same bits as numba's kernel
for the cluster -- wrap-around arithmetic at the types' bounds, signed and unsigned
comparisons, min/max, bitwise operations, shifts by amounts outside the width, conversions
between integers and floats (saturating, NaN to 0) and integer reductions accumulated in
int64/uint64 and cast. One numba compilation per kernel, serial forms (as test_llvm_tier.py
does)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax.core.jaxpr import Literal

from llvm_tier_util import cluster_kernels, only_cluster

N = 1 << 16  # a flat kernel writing into preallocated outputs (codegen.PARALLEL_MIN)
I32 = np.iinfo(np.int32)


def _flat(x, y, u, v, s, f):
    """Every integer operation the tier writes, in one flat cluster."""
    lt = lax.lt(x, y)
    return (
        lax.add(x, y), lax.sub(x, y), lax.mul(x, y), lax.add(x, np.int32(7)),  # (a literal operand)
        lax.mul(u, v), lax.sub(u, v),
        lt, lax.ge(u, v), lax.ne(x, y),
        lax.select_n(lt, x, y), lax.max(x, y), lax.min(u, v), lax.max(u, v),
        lax.bitwise_and(x, y), lax.bitwise_or(u, v), lax.bitwise_xor(x, y), lax.bitwise_not(x),
        lax.bitwise_not(lt),
        lax.shift_left(x, s), lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s),
        lax.shift_right_arithmetic(u, lax.convert_element_type(s, np.uint32)),
        lax.neg(x), lax.abs(x), lax.sign(x), lax.sign(u), lax.neg(u),
        lax.convert_element_type(f, np.int32), lax.convert_element_type(f, np.uint8),
        lax.convert_element_type(f, np.int64), lax.convert_element_type(x, np.float32),
        lax.convert_element_type(x, np.int8), lax.convert_element_type(
            lax.convert_element_type(x, np.int8), np.int64),
        lax.convert_element_type(u, np.float64), lax.convert_element_type(u, np.int64),
        lax.convert_element_type(x, np.bool_), lax.convert_element_type(lt, np.int32),
        lax.integer_pow(x, 3), lax.square(y), lax.square(u), lax.clamp(np.int32(-1000), x, np.int32(1000)),
        lax.select_n(lax.convert_element_type(lax.bitwise_and(x, np.int32(3)), np.int32), x, y, s),
    )


def _flat_inputs():
    rng = np.random.default_rng(11)
    x = rng.integers(I32.min, I32.max, N, dtype=np.int64, endpoint=True).astype(np.int32)
    y = rng.integers(I32.min, I32.max, N, dtype=np.int64, endpoint=True).astype(np.int32)
    edges = np.array([I32.min, I32.max, 0, -1, 1, I32.min, I32.max, 46341, -46341, 16777217],
                     np.int32)
    x[:len(edges)], y[:len(edges)] = edges, edges[::-1]
    y[20:30] = x[20:30]
    u = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    v = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    u[:3], v[:3] = [0, 2**32 - 1, 1], [2**32 - 1, 0, 1]
    s = rng.integers(-3, 40, N).astype(np.int32)
    f = (rng.standard_normal(N) * 3e9).astype(np.float32)
    f[:12] = [np.nan, np.inf, -np.inf, 2.1474836e9, -2.1474836e9, 2147483648.0, -0.9, 0.9,
              255.9, 256.0, -1.5, 9.3e18]
    return x, y, u, v, s, f


def _nested(x, w, b):
    """Integer reductions over some and all axes, one operand broadcast."""
    z = lax.add(x, lax.broadcast_in_dim(b, x.shape, (1,)))
    return (lax.reduce_sum_p.bind(z, axes=(0,)), lax.reduce_max_p.bind(z, axes=(1,)),
            lax.reduce_min_p.bind(z, axes=(0, 1)), lax.reduce_sum_p.bind(z, axes=(0, 1)),
            lax.reduce_prod_p.bind(lax.bitwise_and(z, np.int32(3)), axes=(1,)),
            lax.reduce_sum_p.bind(w, axes=(1,)), lax.reduce_max_p.bind(w, axes=(0,)))


def _args(jaxpr, cluster, plan, values, flat: bool):
    env = {id(v): a for v, a in zip(jaxpr.invars, values)}
    args = []
    for atom, t in zip(cluster.inputs, plan.arg_types):
        value = atom.val if isinstance(atom, Literal) else env[id(atom)]
        if t[0] == "scalar":
            args.append(np.asarray(value, t[1])[()])
        else:
            args.append(np.ascontiguousarray(value).reshape(-1) if flat
                        else np.ascontiguousarray(value))
    return args


def test_flat_integer_kernel_gives_numbas_bits(tmp_path):
    values = _flat_inputs()
    with plax.config.override("jax_enable_x64", True):  # (the int64/float64 conversions)
        jaxpr, cluster = only_cluster(_flat, *values)
        plan, ours, numbas = cluster_kernels(cluster, tmp_path)
    assert plan.out_params
    assert {np.dtype(np.int64), np.dtype(np.float64)} <= {
        np.dtype(v.aval.dtype) for v in cluster.outputs}
    args = _args(jaxpr, cluster, plan, values, flat=True)
    results = []
    for fn in (ours, numbas):
        outs = [np.empty(N, v.aval.dtype) for v in cluster.outputs]
        fn(*args, *outs, N)
        results.append(outs)
    for v, mine, theirs in zip(cluster.outputs, *results):
        assert mine.dtype == theirs.dtype == np.dtype(v.aval.dtype)
        np.testing.assert_array_equal(mine.view(np.uint8), theirs.view(np.uint8),
                                      err_msg=str(v))
    # the arithmetic wraps as the NumPy backend's does (its int32 arithmetic is NumPy's)
    x, y = values[:2]
    order = [next(i for i, v in enumerate(cluster.outputs) if v is o) for o in jaxpr.outvars]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(results[0][order[2]], x * y)
        np.testing.assert_array_equal(results[0][order[0]], x + y)


def test_integer_reductions_give_numbas_bits(tmp_path):
    rng = np.random.default_rng(12)
    x = rng.integers(I32.min, I32.max, (64, 48), dtype=np.int64).astype(np.int32)
    x[0, :] = I32.max  # sums past int32's range: accumulated in int64, then wrapped
    w = rng.integers(0, 256, (64, 48)).astype(np.uint8)
    b = rng.integers(-5, 5, 48).astype(np.int32)
    jaxpr, cluster = only_cluster(_nested, x, w, b)
    plan, ours, numbas = cluster_kernels(cluster, tmp_path)
    assert not plan.out_params
    args = _args(jaxpr, cluster, plan, (x, w, b), flat=False) + list(x.shape)
    mine, theirs = ours(*args), numbas(*args)
    order = [next(i for i, v in enumerate(cluster.outputs) if v is o) for o in jaxpr.outvars]
    reference = plax.jit(_nested, backend="numpy")(x, w, b)
    for k, want in zip(order, reference):
        got = np.atleast_1d(mine[k])
        numba_value = np.atleast_1d(np.asarray(theirs[k], got.dtype))
        np.testing.assert_array_equal(got.view(np.uint8), numba_value.view(np.uint8))
        np.testing.assert_array_equal(got, np.atleast_1d(np.asarray(want)))


def test_integer_division_is_still_declined():
    from plax_numba import codegen, llvm_tier
    x = np.arange(1, N + 1, dtype=np.int32)
    _, cluster = only_cluster(lambda x: lax.div(lax.mul(x, 3), 7), x)
    assert llvm_tier.plan(cluster, codegen.plan_cluster(cluster, preallocate=True)) is None
    assert any(reason.startswith("div") for reason in llvm_tier.declined)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64])
def test_other_widths_wrap_as_numba(dtype, tmp_path):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(13)
    x = rng.integers(info.min, info.max, N, dtype=np.int64 if info.min < 0 else np.uint64,
                     endpoint=True).astype(dtype) if dtype != np.int64 else \
        rng.integers(info.min, info.max, N, dtype=np.int64, endpoint=True)
    x[:2] = [info.min, info.max]

    def f(x):
        return (lax.mul(x, x), lax.add(x, x), lax.shift_left(x, lax.bitwise_and(x, dtype(15))),
                lax.convert_element_type(x, np.float32))
    with plax.config.override("jax_enable_x64", True):  # (int64 stays int64)
        jaxpr, cluster = only_cluster(f, x)
        plan, ours, numbas = cluster_kernels(cluster, tmp_path)
    assert {np.dtype(v.aval.dtype) for v in cluster.outputs} == {np.dtype(dtype),
                                                                 np.dtype(np.float32)}
    args = _args(jaxpr, cluster, plan, (x,), flat=True)
    results = []
    for fn in (ours, numbas):
        outs = [np.empty(N, v.aval.dtype) for v in cluster.outputs]
        fn(*args, *outs, N)
        results.append(outs)
    for mine, theirs in zip(*results):
        np.testing.assert_array_equal(mine.view(np.uint8), theirs.view(np.uint8))

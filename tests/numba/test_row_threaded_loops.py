"""Loops threaded over rows: nested loops whose reductions keep the outermost axis (their
row sums taken a block of rows at a time), indexed loops over many rows, the output buffers
their wrappers allocate, and lone max/min reductions NumPy walks slowly (a 2x2 max-pool)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp

from numba_vs_numpy import compiled_source, jit_both as both


def _reduction_eqn(shape, axes, op=jnp.max, dtype=np.float32):
    x = np.zeros(shape, dtype)
    (eqn,) = plax.make_jaxpr(lambda x: op(x, axes))(x).jaxpr.eqns
    return eqn


@pytest.mark.parametrize("shape, axes, compiled", [
    ((500, 2, 500, 2), (1, 3), True),    # a 2x2 max-pool: reduced and kept alternate
    ((500, 2, 500, 2), (0, 2), True),    # the innermost kept run is 2 long
    ((500, 2, 500, 2), (3,), True),
    ((500, 2, 500, 2), (1,), False),     # innermost run (kept) 1000 long: NumPy is fast
    ((500, 2, 500, 2), (2, 3), False),   # the trailing axes: one contiguous run
    ((1000, 1000), (0,), False),
    ((1000, 1000), (1,), False),
    ((1000, 1000), (0, 1), False),       # one run: a full reduction
    ((8, 1, 4), (2,), True),             # unit axes join no run
])
def test_strided_extreme_selects_short_innermost_runs(shape, axes, compiled):
    from plax_numba.emitter import strided_extreme
    assert strided_extreme(_reduction_eqn(shape, axes)) is compiled
    assert not strided_extreme(_reduction_eqn(shape, axes, jnp.sum))  # sums keep NumPy's
    assert not strided_extreme(_reduction_eqn(shape, axes, jnp.max, np.complex64))


def test_max_pool_runs_as_a_kernel_bit_identical(monkeypatch):
    """A 2x2 max-pool's ``reduce_max`` over axes (1, 3) is compiled (the size threshold
    lowered so a small array takes the path) and equals the reference bit for bit, NaN
    and infinities included; ``reduce_min`` over the other axes too."""
    from plax_numba import emitter
    monkeypatch.setattr(emitter, "LONE_KERNEL_MIN", 1)
    x = np.random.default_rng(0).standard_normal((8, 2, 6, 2)).astype(np.float32)
    x[1, 0, 2, 1] = np.nan
    x[3, 1, 4, 0], x[5, 0, 0, 0] = np.inf, -np.inf

    for pool in (lambda x: jnp.max(x, (1, 3)), lambda x: jnp.min(x, (0, 2))):
        source = compiled_source(pool, x)
        assert source.count("# ---- fused kernel") == 1, source
        (got,), (want,) = both(pool, x, fallback_is_error=True)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_row_reductions_and_broadcasts_thread_over_rows(monkeypatch):
    """Above ``codegen.PARALLEL_MIN`` elements (lowered here), softmax's ``exp(x - max)``
    with its row sums threads its outer loop (``prange`` over rows, each row summed in the
    serial order), and its ``x / sum`` runs nested loops over rows instead of dividing the
    flat position, by rows; the values match the reference within softmax's tolerance, and
    the division alone (the same kernel) the reference bit for bit, zeros, NaN and infinities
    included."""
    from plax_numba import codegen
    from plax_numba.emitter import NumbaEmitter
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    monkeypatch.setattr(codegen, "INDEXED_ROWS_MIN", 8)
    # (softmax's clusters as they are without row-local ones, test_row_local_kernels' own)
    monkeypatch.setattr(NumbaEmitter, "row_local_max_elements", 0)
    x = np.random.default_rng(1).standard_normal((24, 8)).astype(np.float32)

    def softmax(x):
        return plax.nn.softmax(x, -1)
    kernels = compiled_source(softmax, x).split("# ---- fused kernel")[1:]
    summed = [k for k in kernels if "reduce_sum" in k]
    divided = [k for k in kernels if "div" in k.splitlines()[1]]
    assert len(summed) == 1 and "for i0 in prange(n0):" in summed[0]
    assert len(divided) == 1 and "for i0 in prange(n0):" in divided[0]
    assert " // " not in divided[0]
    # read and written by rows (a flat position summed from the indices did not vectorise)
    assert "o0_r[i1] = t1" in divided[0] and "i = " not in divided[0]
    assert "row_w3[i1] = t2" in summed[0]  # the row's exps kept, summed after the row
    (got,), (want,) = both(softmax, x, fallback_is_error=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    s = np.array([2, 0, -0.0, np.inf, np.nan, -3] * 4, np.float32)
    (got,), (want,) = both(lambda x, s: x / s.reshape(-1, 1), _special_rows(x), s,
                           fallback_is_error=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))

    def int_rows(z):  # two innermost-axis reductions of int32 values, an input named a1
        return jnp.sum(z * 3, -1) + jnp.max(z - 1, -1)
    z = np.random.default_rng(2).integers(-50, 50, (20, 9)).astype(np.int32)
    (got,), (want,) = both(int_rows, z, fallback_is_error=True)
    np.testing.assert_array_equal(got, want)


def _special_rows(x):
    """``x`` (float32, at least 6 rows of 8 columns) with NaN, infinities and signed zeros in rows
    of a full block and of the last, partial one."""
    x = x.copy()
    x[1, 3] = np.nan
    x[2, 2], x[2, 5] = np.inf, -np.inf        # inf - inf: NaN in a sum
    x[3, :] = -0.0                            # sum +0 (from its +0 start), max -0
    x[4, :4], x[4, 4:] = -0.0, 0.0            # max +0: -0 orders below +0
    x[5, 6] = np.inf
    x[-1, 0], x[-1, -1] = np.nan, -0.0        # (the partial block's row)
    return x


def test_row_sums_interleave_rows_bit_identical(monkeypatch):
    """A row-wise threaded loop sums blocks of rows side by side (``codegen.row_block``:
    2 rows here, 37 rows so that the last block is partial), each row's float64 additions
    in the order of a sequential loop: the sums equal a sequential float64 reference bit for
    bit, and the row maxima and elementwise values the NumPy backend's, NaN, infinities and
    signed zeros included. Its array output is a buffer its wrapper allocates
    (``KernelPlan.given``): 37x448 values are too large for a whole-program kernel."""
    from plax_numba import codegen
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    x = _special_rows(np.random.default_rng(3).standard_normal((37, 448)).astype(np.float32))

    def rows(x):
        y = x * 3.0
        return y, jnp.sum(y, -1), jnp.max(y, -1)
    source = compiled_source(rows, x)
    assert "whole-program" not in source and "def kernel(a0, a1, o0, n0, n1):" in source
    assert "np.empty((n0" not in source  # (the wrapper allocates o0)
    assert "for row_b in prange((n0 + 1) // 2):" in source, source
    assert "row_c1_1 = row_c1_1 + np.float64(row_w1_1[row_q1])" in source  # the sum's 2nd row
    assert "for row_t1 in range(row_hi - row_lo):" in source   # the partial block's rows
    (y, total, top), (want_y, _, want_top) = both(rows, x, fallback_is_error=True)
    for got, want in ((y, want_y), (top, want_top)):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    y64 = np.concatenate([np.zeros((37, 1)), (x * np.float32(3)).astype(np.float64)], 1)
    with np.errstate(invalid="ignore"):  # (inf - inf)
        sequential = np.cumsum(y64, 1)[:, -1].astype(np.float32)  # (cumsum adds in order)
    np.testing.assert_array_equal(total.view(np.uint32), sequential.view(np.uint32))
    assert total[3] == 0 and not np.signbit(total[3]) and np.signbit(top[3])
    assert not np.signbit(top[4])


def test_row_sums_interleave_rows_of_a_rank_3_loop(monkeypatch):
    """Threaded over its outermost axis, a rank-3 loop blocks its middle one (8 rows, of 19:
    two full blocks and a partial one) and stores each row's sum at its own position."""
    from plax_numba import codegen
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    x = np.random.default_rng(4).standard_normal((2, 19, 8)).astype(np.float32)
    x[1, 17, 2] = np.nan

    def sums(x):
        return jnp.sum(x * 3.0, -1)
    source = compiled_source(sums, x)
    assert "for row_b in range((n1 + 7) // 8):" in source, source
    assert "s1[i0, row_lo + 7] = row_c1_7" in source
    (got,), _ = both(sums, x, fallback_is_error=True)
    y64 = np.concatenate([np.zeros((2, 19, 1)), (x * np.float32(3)).astype(np.float64)], 2)
    sequential = np.cumsum(y64, 2)[..., -1].astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), sequential.view(np.uint32))


def test_row_block_sizes():
    """Blocks of up to ``ROW_BLOCK`` rows whose scratch rows fit ``ROW_BLOCK_BYTES``, at
    least 16 blocks of a matrix's rows, and none without a reduction along the rows that
    keeps a scratch row (float16 values accumulate in the row's loop) or with integer or
    bool rows only; a block never holds more rows than axis -2 has."""
    from plax.lowering import Cluster
    from plax_numba import codegen

    def block(shape, axes=(-1,), dtype=np.float32, op=jnp.sum):
        eqn = _reduction_eqn(shape, tuple(a % len(shape) for a in axes), op, dtype)
        return codegen.row_block(Cluster([eqn], shape, list(eqn.invars), list(eqn.outvars)),
                                 shape)
    assert block((1000, 1000)) == codegen.ROW_BLOCK == 8
    assert block((1000, 10_000)) == 2                     # 4 rows would take 160 KB
    assert block((1000, 100_000)) == 1
    assert block((100, 1000)) == 4 and block((31, 1000)) == 1  # blocks of rows to share out
    assert block((4, 100, 1000)) == 8                     # (threaded over the outer axis)
    assert block((1000, 1000), (0,)) == 1                 # not along the rows
    assert block((1000, 1000), op=jnp.max, dtype=np.float16) == 1  # (no scratch rows)
    assert block((1000, 1000), op=jnp.max, dtype=np.float64) == 8
    # integer and bool rows have no chain of float additions to interleave
    assert block((1000, 1000), dtype=np.int32) == 1
    assert block((1000, 1000), op=jnp.max, dtype=np.int8) == 1
    assert block((1000, 1000), op=jnp.any, dtype=np.bool_) == 1
    assert block((1000, 1000), dtype=np.complex64) == 8    # (complex: float additions)
    # no more than the rows along axis -2: 3 rows take blocks of 2, never of 8
    assert block((1000, 3, 1000)) == 2 and block((1000, 1, 1000)) == 1
    assert block((4, 8, 1000)) == 8


def test_integer_row_sums_beside_blocked_float_ones_bit_identical(monkeypatch):
    """In one row-wise threaded loop, a float row sum is summed in blocks of rows while an
    integer one keeps a row at a time (``codegen._interleaved``); both equal the reference
    bit for bit (the float one a sequential float64 sum, the integer one exactly)."""
    from plax_numba import codegen
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((37, 16)).astype(np.float32)
    n = rng.integers(-1000, 1000, (37, 16)).astype(np.int32)

    def sums(x, n):
        return jnp.sum(x * 3.0, -1), jnp.sum(n * 3, -1)
    source = compiled_source(sums, x, n)
    assert "for row_b in prange((n0 + 1) // 2):" in source, source
    assert source.count("row_c") and "row_c2_" not in source and "row_c3_" not in source
    assert source.count("for row_t") == 1  # the float sum's partial block only
    (total, itotal), (_, want_itotal) = both(sums, x, n, fallback_is_error=True)
    np.testing.assert_array_equal(itotal, want_itotal)
    y64 = np.concatenate([np.zeros((37, 1)), (x * np.float32(3)).astype(np.float64)], 1)
    sequential = np.cumsum(y64, 1)[:, -1].astype(np.float32)
    np.testing.assert_array_equal(total.view(np.uint32), sequential.view(np.uint32))


def test_first_tier_takes_the_given_output_buffers(monkeypatch):
    """A large nested kernel's array outputs are buffers its wrapper allocates
    (``KernelPlan.given``); the first tier's kernel, called as numba's is, writes into those
    and returns only the reductions, bit-identical to the NumPy backend (the elementwise
    output and row maxima) and to a sequential float64 sum."""
    from plax_numba import codegen, llvm_tier
    from llvm_tier_util import only_cluster
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    x = _special_rows(np.random.default_rng(5).standard_normal((37, 8)).astype(np.float32))

    def rows(x):
        y = x * 3.0
        return y, jnp.sum(y, -1), jnp.max(y, -1)
    jaxpr, cluster = only_cluster(rows, x)
    plan = codegen.plan_cluster(cluster, preallocate=True)
    (y_at,) = plan.given
    assert cluster.outputs[y_at] is jaxpr.outvars[0] and "_empty(" in plan.wrapper
    first = llvm_tier.plan(cluster, plan)
    assert first is not None, llvm_tier.declined
    kernel = llvm_tier.build(first, plan.primitives, "<test>")
    y = np.full(x.shape, np.nan, np.float32)
    ins = [np.asarray(atom.val, t[1])[()] if t[0] == "scalar" else x  # (x, the literal 3.0)
           for atom, t in zip(cluster.inputs, plan.arg_types)]
    reductions = kernel(*ins, y, *x.shape)
    assert len(reductions) == 2
    want_y, _, want_top = plax.jit(rows, backend="numpy")(x)
    by_output = {id(v): r for v, r in zip([v for j, v in enumerate(cluster.outputs)
                                           if j != y_at], reductions)}
    total, top = by_output[id(jaxpr.outvars[1])], by_output[id(jaxpr.outvars[2])]
    np.testing.assert_array_equal(y.view(np.uint32), np.asarray(want_y).view(np.uint32))
    np.testing.assert_array_equal(top.view(np.uint32), np.asarray(want_top).view(np.uint32))
    y64 = np.concatenate([np.zeros((37, 1)), y.astype(np.float64)], 1)
    with np.errstate(invalid="ignore"):
        sequential = np.cumsum(y64, 1)[:, -1].astype(np.float32)
    np.testing.assert_array_equal(total.view(np.uint32), sequential.view(np.uint32))


def test_lone_relu_is_a_threaded_kernel_bit_identical():
    """A large lone ``maximum(x, 0.0)`` (relu) runs as a one-equation kernel threaded over
    its elements, writing into the buffer its wrapper allocates (not NumPy's ``maximum``,
    single-threaded, which returns either of two equal zeros): NaN propagates and -0 orders
    below +0, bit for bit as the NumPy backend."""
    x = np.random.default_rng(6).standard_normal((256, 128)).astype(np.float32)  # (PARALLEL_MIN)
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -1e-45]

    def relu(x):
        return jnp.maximum(x, 0.0)
    source = compiled_source(relu, x)
    assert "def kernel(a0, a1, o0, n):" in source and "for i in prange(n):" in source
    assert "fmax(a0_v, a1)" in source
    (got,), (want,) = both(relu, x, fallback_is_error=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.isnan(got[0, 0]) and not np.signbit(got[0, 3:6]).any()


def test_indexed_loop_over_few_outer_rows_runs_nested(monkeypatch):
    """An indexed loop (a partial broadcast, no reduction) over (2, 24, 400) has 48 rows but
    only 2 along its outermost axis (attention's scores over their row sums: 8x128x128).
    It runs nested loops by rows, no division per element (the flat loop's two divisions
    and a remainder per element kept the row from vectorising): threaded, over all 48 rows
    as one range (the leading indices from the row's number), not over the 2 outer items;
    serial (a program whose matrix products take BLAS's threads), as plain nested loops.
    The threaded kernel equals the reference bit for bit (zeros, NaN and infinities among
    the divisors); one compile, the plans' texts without one."""
    from plax.lowering import explicit_broadcasts, find_clusters
    from plax_numba import codegen
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 400)).astype(np.float32)  # (above WHOLE_MAX elements)
    s = np.array([2, 0, -0.0, np.inf, np.nan, -3] * 8, np.float32).reshape(2, 24, 1)

    def scaled(x, s):
        return x / s
    (cluster,) = find_clusters(explicit_broadcasts(plax.make_jaxpr(scaled)(x, s).jaxpr))
    serial = codegen.plan_cluster(cluster, preallocate=True, parallel=False).source
    assert " // " not in serial and "for i2 in range(n2):" in serial, serial
    threaded = compiled_source(scaled, x, s)
    assert "for row in prange(n0 * n1):" in threaded, threaded
    assert "i0 = row // (n1)" in threaded and threaded.count(" // ") == 1, threaded
    assert "for i2 in range(n2):" in threaded and "o0_r[i2] = t1" in threaded, threaded
    (got,), (want,) = both(scaled, x, s, fallback_is_error=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_serial_row_sums_of_long_rows_are_summed_after_the_row():
    """Below ``PARALLEL_MIN`` elements, a serial loop over rows of at least
    ``codegen.ROW_WISE_MIN`` elements keeps each row's values in a scratch row and sums them
    after the row, a block of rows side by side (``row_block(..., threaded=False)``: no
    blocks to share out), so the row's loop carries no reduction and vectorises; each row
    added in order, in float64: a sequential reference's bits. Short rows keep the sums in
    the row's loop."""
    from plax.lowering import Cluster
    from plax_numba import codegen
    x = _special_rows(np.random.default_rng(5).standard_normal((13, 96)).astype(np.float32))
    assert x.size < codegen.PARALLEL_MIN and x.shape[1] >= codegen.ROW_WISE_MIN

    def rows(x):
        y = x * 3.0 + 1.0   # (exact operations: the reference's bits)
        return y, jnp.sum(y, -1)
    source = compiled_source(rows, x)
    assert "in prange(" not in source and "for row_b in range((n0 + 7) // 8):" in source, source
    (y, total), (want_y, _) = both(rows, x, fallback_is_error=True)
    np.testing.assert_array_equal(y.view(np.uint32), want_y.view(np.uint32))
    y64 = np.concatenate([np.zeros((13, 1)), y.astype(np.float64)], 1)
    with np.errstate(invalid="ignore"):
        sequential = np.cumsum(y64, 1)[:, -1].astype(np.float32)   # (cumsum adds in order)
    np.testing.assert_array_equal(total.view(np.uint32), sequential.view(np.uint32))
    short = np.ones((13, codegen.ROW_WISE_MIN - 1), np.float32)
    assert "row_w" not in compiled_source(lambda x: jnp.sum(x * 2.0, -1), short)
    eqn = _reduction_eqn((20, 500), (1,), jnp.sum)
    cluster = Cluster([eqn], (20, 500), list(eqn.invars), list(eqn.outvars))
    assert codegen.row_block(cluster, (20, 500), threaded=False) == 8
    assert codegen.row_block(cluster, (20, 500)) == 1   # (threaded: 16 blocks to share out)

"""Products too small to gain from BLAS's threads run on one BLAS thread in the Numba
backend's compiled programs (``kernels.BLAS_SERIAL_MAX``), batched ones included, with the
reference kernel's values. No numba kernel is compiled here: a lone ``dot_general`` is a
BLAS step."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import blas_threads
from plax import lax, numpy as jnp
from plax_numba import kernels

needs_openblas = pytest.mark.skipif(not blas_threads._controls(),
                                    reason="no OpenBLAS loaded: nothing to count")


def _threads_seen(fn):
    """``fn`` recording BLAS's thread count while it runs (into the list it returns)."""
    seen = []

    def run(*args):
        seen.append([get() for get, _ in blas_threads._controls()])
        return fn(*args)
    return run, seen


@needs_openblas
def test_one_thread_inside_and_restored_after():
    before = [get() for get, _ in blas_threads._controls()]
    run, seen = _threads_seen(np.dot)
    wrapped = blas_threads.on_one_thread(run)
    assert float(wrapped(np.ones(3), np.ones(3))) == 3.0
    with blas_threads.limited(2):  # nested in a block: the smaller count, then the block's
        held = [get() for get, _ in blas_threads._controls()]
        wrapped(np.ones(3), np.ones(3))
        assert [get() for get, _ in blas_threads._controls()] == held
    assert seen == [[1] * len(before), [1] * len(before)]
    assert [get() for get, _ in blas_threads._controls()] == before
    assert not blas_threads.held()


def test_overlapping_blocks_on_two_threads_keep_the_smallest_count(monkeypatch):
    """A pmap's ``limited`` block opened while another thread runs a product on one thread
    keeps its own count once that product ends (it was reset to the count from before both),
    and the count from before comes back when the last block ends. (A stand-in BLAS: any
    core count, any library.)"""
    import threading
    count, log = [8], []

    def put(n):
        count[0] = n
        log.append(n)
    monkeypatch.setattr(blas_threads, "_controls", lambda: [(lambda: count[0], put)])
    monkeypatch.setattr(blas_threads, "cores", lambda: 8)
    inside, leave = threading.Event(), threading.Event()
    product = threading.Thread(target=blas_threads.on_one_thread(
        lambda: (inside.set(), leave.wait(30))))
    product.start()
    assert inside.wait(30) and count[0] == 1
    with blas_threads.limited(2):   # asks for 4: the product's 1 is smaller
        assert count[0] == 1
        leave.set()
        product.join()
        assert count[0] == 4 and blas_threads.held()
    assert count[0] == 8 and not blas_threads.held()
    assert log == [1, 4, 8]


@needs_openblas
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_a_child_forked_while_another_thread_holds_the_count():
    """The thread holding BLAS at one thread (and its restoring) is not in a forked child:
    the child gets the count back, and holds and restores it itself."""
    import os
    import threading

    def counts():
        return [get() for get, _ in blas_threads._controls()]
    before = counts()
    inside, leave = threading.Event(), threading.Event()
    holder = threading.Thread(target=blas_threads.on_one_thread(
        lambda: (inside.set(), leave.wait(30))))
    holder.start()
    try:
        assert inside.wait(30) and counts() == [1] * len(before)
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if the count is back and held anew
            ok = False
            try:
                free = counts() == before and not blas_threads.held()
                seen = []
                blas_threads.on_one_thread(lambda: seen.append(counts()))()
                ok = free and seen == [[1] * len(before)] and counts() == before
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        leave.set()
        holder.join()
    assert os.waitstatus_to_exitcode(status) == 0
    assert counts() == before and not blas_threads.held()


def _eqn(f, *args):
    return plax.make_jaxpr(f)(*args).eqns[0]


def test_which_products_run_on_one_blas_thread():
    """Per BLAS call: a batched product counts one batch element's multiply-adds."""
    f32 = np.float32
    mid = np.ones((2, 64, 64), f32), np.ones((2, 64, 128), f32)      # 512K per matrix
    small = np.ones((64, 8, 8), f32), np.ones((64, 8, 8), f32)       # 512 per matrix
    big = np.ones((8, 256, 256), f32), np.ones((8, 256, 256), f32)   # 16M per matrix
    batched = lambda a, b: jnp.einsum("bij,bjk->bik", a, b)
    cases = {"mid": _eqn(batched, *mid), "small": _eqn(batched, *small),
             "big": _eqn(batched, *big),
             "plain mid": _eqn(jnp.dot, np.ones((64, 128), f32), np.ones((128, 64), f32))}
    assert kernels.madds_per_blas_call(cases["mid"]) == 64 * 64 * 128
    assert kernels.madds_per_blas_call(cases["small"]) == 8 * 8 * 8
    one_thread = {name: kernels.blas_threads_for(eqn, np.dot) is not np.dot
                  for name, eqn in cases.items()}
    assert one_thread == {"mid": True, "small": False, "big": False, "plain mid": True}


@needs_openblas
@pytest.mark.parametrize("spec,shapes", [
    ("bqd,bkd->bqk", [(2, 96, 64), (2, 80, 64)]),   # a transposed operand (attention scores)
    ("bij,bjk->bik", [(2, 64, 64), (2, 64, 128)]),
    ("ij,jk->ik", [(64, 128), (128, 40)]),
])
def test_values_against_the_numpy_backend(spec, shapes, monkeypatch):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    f = lambda a, b: jnp.einsum(spec, a, b)
    inside = []
    real = blas_threads.on_one_thread

    def spying(fn):  # records the count BLAS has while the product step runs
        return real(lambda *a: (inside.append(blas_threads._controls()[0][0]()), fn(*a))[1])
    monkeypatch.setattr(blas_threads, "on_one_thread", spying)
    got = np.asarray(plax.jit(f, backend="numba")(*args))
    want = np.asarray(plax.jit(f, backend="numpy")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(got, np.einsum(spec, *[a.astype(np.float64) for a in args]),
                               rtol=1e-4, atol=1e-4)
    assert inside == [1]


def _conv(groups=1):
    return lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=groups)


@pytest.mark.parametrize("groups", [1, 2])
def test_small_convolutions_on_one_blas_thread(groups, monkeypatch):
    """The size of the convolution's im2col products decides (one group's: one block of
    2 x 8 x 8 rows of 9 x 16 // groups values, 32 // groups output features; 590K
    multiply-adds, one BLAS thread; grouped: 147K, below what OpenBLAS threads, left alone);
    the values are the NumPy backend's."""
    from plax_numba import kernels_conv
    rng = np.random.default_rng(groups)
    x = rng.standard_normal((2, 8, 8, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16 // groups, 32)).astype(np.float32)
    eqn = _eqn(_conv(groups), x, w)
    avals = [v.aval for v in eqn.invars]
    madds = kernels_conv.madds_per_product(*avals, tuple(eqn.params.items()))
    assert madds == (2 * 8 * 8) * (9 * 16 // groups) * (32 // groups)
    assert (kernels.BLAS_THREADED_MIN < madds <= kernels.BLAS_SERIAL_MAX) == (groups == 1)
    backend = plax.plugins.registry().get_backend("numba")
    assert backend.eager_impl(eqn.primitive) is kernels_conv.conv_kernel
    inside = []
    real = kernels_conv.on_one_thread
    monkeypatch.setattr(kernels_conv, "on_one_thread", lambda fn: real(
        lambda *a, **k: (inside.append(blas_threads._controls()[0][0]()
                                       if blas_threads._controls() else 1), fn(*a, **k))[1]))
    got = np.asarray(plax.jit(_conv(groups), backend="numba")(x, w))
    want = np.asarray(plax.jit(_conv(groups), backend="numpy")(x, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    small = kernels.BLAS_THREADED_MIN < madds <= kernels.BLAS_SERIAL_MAX
    assert inside == ([1] if small else [])


def test_large_windows_keep_blas_threads():
    """A window of more offsets than the reference kernel takes one by one is one im2col
    product: not counted as small."""
    from plax_numba import kernels_conv
    x, w = np.ones((1, 16, 16, 4), np.float32), np.ones((7, 7, 4, 4), np.float32)
    eqn = _eqn(_conv(), x, w)
    avals = [v.aval for v in eqn.invars]
    assert kernels_conv.madds_per_product(*avals, tuple(eqn.params.items())) == 0


def test_large_products_split_into_column_blocks(monkeypatch):
    """Above BLAS_SERIAL_MAX a matrix product with enough columns is computed as fixed column
    blocks on this thread and helpers: the same bits whoever computes the blocks (nested in
    a block holding BLAS's count, this thread computes them all), the NumPy backend's values
    within float32 rounding. Only with PLAX_NUMBA_SPLIT_PRODUCTS=1 (off by default)."""
    from plax_numba import split_products
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 64)).astype(np.float32)     # contracted over its rows
    b = rng.standard_normal((160, 256)).astype(np.float32)    # and over its columns
    f = lambda a, b: lax.dot_general(a, b, (((0,), (1,)), ((), ())))   # (64, 160)
    eqn = _eqn(f, a, b)
    assert kernels.product_madds(eqn) > kernels.BLAS_SERIAL_MAX
    monkeypatch.delenv("PLAX_NUMBA_SPLIT_PRODUCTS", raising=False)
    assert not kernels.plain_dot(eqn).__qualname__.startswith("split_dot")
    monkeypatch.setenv("PLAX_NUMBA_SPLIT_PRODUCTS", "1")
    step = kernels.plain_dot(eqn)
    assert step.__qualname__.startswith("split_dot")
    blocks = []
    real = split_products.run_blocks
    monkeypatch.setattr(split_products, "run_blocks",
                        lambda block, n: (blocks.append(n), real(block, n))[1])
    got = step(a, b)
    assert blocks == [split_products.BLOCKS]
    with blas_threads.limited(blas_threads.cores()):  # (one BLAS thread on any host)
        nested = blas_threads.held()
        alone = step(a, b)
    np.testing.assert_array_equal(got, alone)
    assert nested == (blas_threads.cores() > 1) or not blas_threads._controls()
    np.testing.assert_allclose(got, np.asarray(plax.jit(f, backend="numpy")(a, b)),
                               rtol=1e-5, atol=1e-4)  # (sums of 256 products near 16)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_split_products_in_a_forked_child():
    """A child forked after the helpers started gets helpers of its own (the parent's
    threads do not exist there: waiting on them would hang)."""
    import os
    from plax_numba import split_products
    split_products.run_blocks(lambda i: None, 4)  # the helpers exist
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the blocks ran (killed after 30 s if it hangs)
        import signal
        signal.alarm(30)
        done = []
        try:
            split_products.run_blocks(done.append, 4)
        finally:
            os._exit(0 if sorted(done) == [0, 1, 2, 3] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

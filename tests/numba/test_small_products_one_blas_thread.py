"""Products too small to gain from BLAS's threads run on one BLAS thread in the Numba
backend's compiled programs (``kernels.BLAS_SERIAL_MAX``), batched ones included, with the
reference kernel's values. No numba kernel is compiled here: a lone ``dot_general`` is a
BLAS step."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import blas_threads
from plax import numpy as jnp
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
    with blas_threads.limited(2):  # nested in a block holding the count: left as it is
        held = [get() for get, _ in blas_threads._controls()]
        wrapped(np.ones(3), np.ones(3))
    assert seen == [[1] * len(before), held]
    assert [get() for get, _ in blas_threads._controls()] == before
    assert blas_threads._depth[0] == 0


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

"""Per-equation kernels of the Numba backend: what runs an equation that is not fused.

* Lone elementwise equations call their NumPy ufunc directly (one native call, ``out=``
  reuse of dead temporaries, floating-point warnings switched off once around the program):
  compiling one operation buys nothing over the ufunc.
* ``cond``, ``while`` and ``scan`` run their bodies compiled by this backend (so the bodies'
  clusters are fused kernels too), cached weakly per body.
* ``dot_general`` of matrices and vectors without batch dimensions is one ``np.dot`` on
  (possibly transposed) views, BLAS reading the transposition from the strides
  (:func:`plain_dot`); batched float products use the reference kernel (one batched
  ``matmul``). Products too small to gain from BLAS's threads run on one BLAS thread
  (:data:`BLAS_SERIAL_MAX`).
* The backend's own host kernels, in its kernel table (``Backend.eager_impl``, eager calls
  and compiled programs alike): ``top_k`` by selection (:mod:`plax_numba.kernels_select`),
  whole-row ``gather`` and ``scatter-add`` (:mod:`plax_numba.kernels_rows`), and the
  reference convolution on one BLAS thread where its products are small
  (:mod:`plax_numba.kernels_conv`); each gives the reference kernel's values.
* Every other core primitive uses the reference kernel (``plax_numpy.impls()``), one
  vectorised NumPy call each.
"""
from __future__ import annotations

import functools
import math
import time

import numpy as np

from plax import lax
from plax.config import env_flag
from plax.lowering.host import numpy_errors_off

from plax_numba.codegen import DTYPES

UFUNCS = {
    lax.add_p: np.add, lax.add_any_p: np.add, lax.sub_p: np.subtract, lax.mul_p: np.multiply,
    lax.eq_p: np.equal, lax.ne_p: np.not_equal, lax.lt_p: np.less, lax.le_p: np.less_equal,
    lax.gt_p: np.greater, lax.ge_p: np.greater_equal,
    lax.and_p: np.bitwise_and, lax.or_p: np.bitwise_or, lax.xor_p: np.bitwise_xor,
    lax.neg_p: np.negative, lax.is_finite_p: np.isfinite,
}
# max/min on integers and bools only: on floats XLA orders -0 below +0, NumPy's ufuncs return
# either of two equal operands (the generated loop's fmax/fmin follow XLA)
EXACT_ON_INTEGERS = {lax.max_p: np.maximum, lax.min_p: np.minimum}
FLOAT_UFUNCS = {
    lax.exp_p: np.exp, lax.exp2_p: np.exp2, lax.log_p: np.log, lax.log1p_p: np.log1p,
    lax.expm1_p: np.expm1, lax.tanh_p: np.tanh, lax.sin_p: np.sin, lax.cos_p: np.cos,
    lax.tan_p: np.tan, lax.sqrt_p: np.sqrt, lax.floor_p: np.floor, lax.ceil_p: np.ceil,
    lax.atan2_p: np.arctan2,
}
# not pow: NumPy's array power takes x ** 0.5 as sqrt(x) (-0 and nan at x = -0 and -inf, where
# IEEE pow and XLA give +0 and +inf); the generated scalar loop calls C's pow



def direct_ufunc(eqn):
    """The NumPy ufunc computing ``eqn`` exactly as the reference kernel does, or None."""
    if eqn.params:
        return None
    dtypes = {np.dtype(v.aval.dtype) for v in eqn.invars}
    if not dtypes or not dtypes <= DTYPES:
        return None
    fn = UFUNCS.get(eqn.primitive)
    if fn is None and all(d.kind in "biu" for d in dtypes):
        fn = EXACT_ON_INTEGERS.get(eqn.primitive)
    if fn is None and all(d.kind == "f" for d in dtypes):
        fn = FLOAT_UFUNCS.get(eqn.primitive)
    if fn is None or (eqn.primitive is lax.neg_p and dtypes == {np.dtype(bool)}):
        return None
    return fn


# ---------------------------------------------------------------- BLAS's spinning threads

#: matrix products of more multiply-adds than this run on BLAS's threads (OpenBLAS: above
#: 65536 * GEMM_MULTITHREAD_THRESHOLD (4))
BLAS_THREADED_MIN = 1 << 18
#: how long OpenBLAS's worker threads keep spinning after a product (2**28 cycles, ~0.1 s at
#: 3 GHz, unless OPENBLAS_THREAD_TIMEOUT was set before NumPy was imported)
BLAS_SPIN_SECONDS = 0.1
_last_threaded_product = [-math.inf]  # perf_counter() when the last such product finished


def product_madds(eqn) -> int:
    """The multiply-adds of a ``dot_general`` equation."""
    (lc, _), _ = eqn.params["dimension_numbers"]
    k = math.prod(eqn.invars[0].aval.shape[d] for d in lc)
    return k * math.prod(eqn.outvars[0].aval.shape)


#: a BLAS call (one product, or one matrix of a batched product) of more multiply-adds than
#: :data:`BLAS_THREADED_MIN` and at most this many runs on one BLAS thread
#: (``plax.blas_threads.on_one_thread``): threads gain at most ~15% there on a quiet host
#: (1-2M multiply-adds: 19 / 31 us threaded, 19 / 36 us on one thread), while on a loaded one
#: OpenBLAS's threads wait for cores other processes hold (attention's two batched products,
#: 8 x 1M multiply-adds, took 5-250 ms per call inside a jitted program; 0.75 ms serial)
BLAS_SERIAL_MAX = 1 << 21


#: with ``PLAX_NUMBA_SPLIT_PRODUCTS=1``, a matrix product above :data:`BLAS_SERIAL_MAX` with at
#: least this many result columns is computed as column blocks on this thread and helper
#: threads, one BLAS thread each (:mod:`plax_numba.split_products`): OpenBLAS's own threads
#: wait for one another, so a heavily loaded host stalls them (the MLP step at load average
#: 8-9: ~150 ms with OpenBLAS's threads, ~4-6 ms split); at load 3-4 OpenBLAS's threads were
#: faster (3.0-3.5 against 4.2-5.3 ms), hence off by default
SPLIT_MIN_COLUMNS = 64


def madds_per_blas_call(eqn) -> int:
    """The multiply-adds of one BLAS call of a ``dot_general`` equation: the whole product,
    or one batch element's where it has batch dimensions (each is its own BLAS call)."""
    _, (lb, _) = eqn.params["dimension_numbers"]
    batch = math.prod(eqn.invars[0].aval.shape[d] for d in lb)
    return product_madds(eqn) // batch if batch else 0


def blas_threads_for(eqn, step):
    """``step`` (computing the ``dot_general`` ``eqn`` with BLAS) run on one BLAS thread
    where each BLAS call is too small to gain from more (:data:`BLAS_SERIAL_MAX`), else
    ``step`` itself (products OpenBLAS does not thread are left as they are)."""
    from plax.blas_threads import on_one_thread
    if BLAS_THREADED_MIN < madds_per_blas_call(eqn) <= BLAS_SERIAL_MAX:
        return on_one_thread(step)
    return step


def noting_threaded_product(fn):
    """``fn`` (a step computing a large product) recording when it finished, for
    :func:`blas_threads_spinning`."""
    clock, now = _last_threaded_product, time.perf_counter

    def step(*args, **kwargs):
        out = fn(*args, **kwargs)
        clock[0] = now()
        return out
    return step


def blas_threads_spinning() -> bool:
    """Whether a product on BLAS's threads finished less than :data:`BLAS_SPIN_SECONDS` ago
    (its workers may still hold the cores)."""
    return time.perf_counter() - _last_threaded_product[0] < BLAS_SPIN_SECONDS


def yielding_to_blas(kernel):
    """``kernel`` (a ``prange`` kernel's entry point) run on one numba thread while BLAS's
    threads spin (:func:`blas_threads_spinning`), on all of them otherwise. A parallel loop
    started right after a product waited for the cores BLAS's workers held: a 401,408-element
    update took 260 us after a product, 30 us alone, 55 us serial. Elementwise loops give the
    same bits on any number of threads."""
    from plax_numba import native_loader
    functions = native_loader.thread_count_functions()  # (a kernel loaded without numba)
    if functions is None:
        import numba
        functions = numba.get_num_threads, numba.set_num_threads
    get, set_ = functions

    def run(*args):
        if not blas_threads_spinning():
            return kernel(*args)
        threads = get()
        set_(1)
        try:
            return kernel(*args)
        finally:
            set_(threads)
    return run


def plain_dot(eqn):
    """A step computing a float or complex ``dot_general`` whose operands and result have
    one dtype, or None (NumPy's integer ``dot`` and the reference agree, but the gain is
    BLAS's). Without batch dimensions, rank <= 2 operands: one ``np.dot`` of views (the
    reference kernel transposes, reshapes and calls a batched ``matmul``); other products
    (batched ones): the reference kernel. Either on one BLAS thread where its BLAS calls are
    small (:func:`blas_threads_for`), or noting when it finished where they run on BLAS's
    threads (:func:`noting_threaded_product`).

    Example:
      >>> x, w = jnp.ones((4, 3)), jnp.ones((3, 2))
      >>> step = plain_dot(plax.make_jaxpr(jnp.dot)(x, w).eqns[0])
      >>> step is None  # float32 operands and result: one np.dot
      False
    """
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    ls, rs = lhs.aval.shape, rhs.aval.shape
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    if (dtype.kind not in "fc" or dtype.itemsize < 4
            or np.dtype(lhs.aval.dtype) != dtype or np.dtype(rhs.aval.dtype) != dtype):
        return None
    if not lb and not rb and 1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and len(lc) == 1:
        if (len(ls) == 2 and len(rs) == 2 and product_madds(eqn) > BLAS_SERIAL_MAX
                and rs[1 - rc[0]] >= SPLIT_MIN_COLUMNS
                and env_flag("PLAX_NUMBA_SPLIT_PRODUCTS", False)):
            from plax_numba.split_products import split_dot
            return split_dot(lc[0] == 0, rc[0] == 1)
        return _on_blas_threads(eqn, _dot_of_views(ls, rs, lc, rc))
    from plax_numpy import impls
    return _on_blas_threads(eqn, functools.partial(impls()[lax.dot_general_p], **eqn.params))


def _on_blas_threads(eqn, step):
    """``step`` on one BLAS thread where its BLAS calls are small (:func:`blas_threads_for`),
    noting when it finished where they run on BLAS's threads (whose workers then spin)."""
    if madds_per_blas_call(eqn) > BLAS_SERIAL_MAX:
        return noting_threaded_product(step)
    return blas_threads_for(eqn, step)


def _dot_of_views(ls, rs, lc, rc):
    """``np.dot`` of the operands or of their transposed views, as the contracted axes
    ask."""
    lt = len(ls) == 2 and lc[0] == 0   # contracting the lhs's rows: use its transpose
    rt = len(rs) == 2 and rc[0] == 1   # contracting the rhs's columns: likewise
    dot = np.dot

    if lt and rt:
        return lambda a, b: dot(a.T, b.T)
    if lt:
        return lambda a, b: dot(a.T, b)
    if rt:
        return lambda a, b: dot(a, b.T)
    return dot


quiet_enter, quiet_leave = numpy_errors_off()  # the same switch as the NumPy backend's

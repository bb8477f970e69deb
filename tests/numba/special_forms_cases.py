"""The iterative special functions' scalar forms (plax_numba.special_gamma, special_zeta,
special_beta, special_erf) as test cases: the inputs each is measured on (deterministic
sweeps and the edges), its float64 reference (the NumPy backend's kernel, SciPy underneath,
at float64), the error metric in ulps, and the bounds those measurements gave.

Shared by tests/numba/test_special_iterative_forms.py and, through its ``measure`` entry
point, by whoever wants the table (``python tests/numba/special_forms_cases.py`` prints
plax's and JAX's errors on the same inputs).
"""
from __future__ import annotations

import functools

import numpy as np

import plax
from plax import lax

_EDGE_VALUES = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-30, 1e30, np.inf, -np.inf, np.nan)


#: random_gamma_grad's reference kernel never stops iterating at a = 1e30 (a + 1 == a), and
#: takes a NumPy pass per term (~sqrt(a) of them) beyond
_DERIVATIVE_EDGES = tuple(v for v in _EDGE_VALUES if v != 1e30) + (1e3,)


def _edge_grid(arity: int, values=_EDGE_VALUES) -> tuple[np.ndarray, ...]:
    """Every combination of the edge ``values`` over ``arity`` operands."""
    mesh = np.meshgrid(*([np.array(values)] * arity), indexing="ij")
    return tuple(m.ravel() for m in mesh)


def _log_uniform(rng, lo, hi, n):
    return 10.0 ** rng.uniform(np.log10(lo), np.log10(hi), n)


def _gamma_args(rng, n):
    """(a, x): a dense linear square [0, 30]**2, log-uniform ones over [1e-3, 1e3], and the
    band x ~ a, where the series and fractions take longest."""
    a = np.concatenate([rng.uniform(0, 30, n), _log_uniform(rng, 1e-3, 1e3, n),
                        _log_uniform(rng, 1, 1e3, n // 4)])
    x = np.concatenate([rng.uniform(0, 30, n), _log_uniform(rng, 1e-3, 1e3, n),
                        a[2 * n:] * rng.uniform(0.8, 1.25, n // 4)])
    return a, x


def _gamma_derivative_args(rng, n):
    """(a, x) for the derivatives: as :func:`_gamma_args` up to 100 (the reference kernel
    iterates in NumPy, one array pass per term: larger shapes take it minutes)."""
    a = np.concatenate([rng.uniform(0, 30, n), _log_uniform(rng, 1e-3, 100, n)])
    x = np.concatenate([rng.uniform(0, 30, n), _log_uniform(rng, 1e-3, 100, n)])
    return a, x


def _zeta_args(rng, n):
    """(s, q): s in [1, 30] with q in (0, 50], and integer s with negative q."""
    s = np.concatenate([rng.uniform(1.0, 30, n), np.round(rng.uniform(2, 12, n // 4))])
    q = np.concatenate([_log_uniform(rng, 1e-3, 50, n), rng.uniform(-20, 0, n // 4)])
    return s, q


def _polygamma_args(rng, n):
    """(m, x): orders 1..8 over x in (0, 40] (order 0 is digamma, whose zero at 1.46 makes a
    relative bound meaningless: tests/numba/test_special_scalar_forms.py; negative x:
    test_polygamma_negative_arguments)."""
    return (np.floor(rng.uniform(1, 9, n)),
            np.concatenate([_log_uniform(rng, 1e-3, 40, n // 2), rng.uniform(0, 40, n - n // 2)]))


def _betainc_args(rng, n):
    """(a, b, x): a, b in [0.1, 60] (linear and log-uniform), x in [0, 1]."""
    a = np.concatenate([rng.uniform(0.1, 60, n), _log_uniform(rng, 0.1, 60, n)])
    b = np.concatenate([rng.uniform(0.1, 60, n), _log_uniform(rng, 0.1, 60, n)])
    return a, b, rng.uniform(0, 1, 2 * n)


def _erf_inv_args(rng, n):
    k = np.arange(1, 53)
    return (np.concatenate([rng.uniform(-1, 1, n), 1 - 2.0 ** -k, -(1 - 2.0 ** -k),
                            2.0 ** -np.arange(1, 1000)]),)


class Case:
    """One function: its ``lax`` callable, the ``plax_numba`` module and name of its scalar
    forms, its sweep, and its measured bounds in ulps (float32, float64; None: no float32
    form to test here)."""

    def __init__(self, name, module, args, bound32, bound64, form=None, edges=_EDGE_VALUES,
                 jax_args=None):
        self.name, self.module, self.args, self.edges = name, module, args, edges
        #: the sweep compared with JAX: where SciPy's own error is below both libraries'
        self.jax_args = jax_args or args
        self.bound32, self.bound64 = bound32, bound64
        self.form = form or name

    @property
    def lax_fn(self):
        return getattr(lax, self.name)

    def scalar_form(self, bits: int):
        import importlib
        return getattr(importlib.import_module(f"plax_numba.{self.module}"),
                       f"{self.form}_f{bits}")

    def inputs(self, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
        """The sweep (``n`` per part) followed by the edge grid, as float64."""
        sweep = self.args(np.random.default_rng(seed), n)
        edges = _edge_grid(len(sweep), self.edges)
        return tuple(np.concatenate([s, e]) for s, e in zip(sweep, edges))


# bounds: the largest error these sweeps measured, with a little headroom. float32 is the
# float64 value rounded once. float64 is measured against SciPy, whose own error is part of
# the figure: for igamma/igammac with a of several hundred SciPy is the one off (by ~1e4
# ulps; plax within ~700 of mpmath, test_igamma_large_parameters_against_mpmath), and the
# gamma derivatives' reference iterates to its own stopping rule. zeta is Cephes' algorithm,
# as SciPy's: the same bits.
CASES = {c.name: c for c in (
    Case("igamma", "special_gamma", _gamma_args, 0.51, 1.4e4,
         jax_args=_gamma_derivative_args),
    Case("igammac", "special_gamma", _gamma_args, 0.51, 4e3,
         jax_args=_gamma_derivative_args),
    Case("igamma_grad_a", "special_gamma", _gamma_derivative_args, 0.51, 1.5e3,
         edges=_DERIVATIVE_EDGES),
    Case("random_gamma_grad", "special_gamma", _gamma_derivative_args, 1.0, 128,
         edges=_DERIVATIVE_EDGES),
    Case("zeta", "special_zeta", _zeta_args, 0.51, 1),
    Case("polygamma", "special_zeta", _polygamma_args, 0.51, 8),
    Case("betainc", "special_beta", _betainc_args, 0.51, 400),
    Case("erf_inv", "special_erf", _erf_inv_args, None, 4),
)}


@functools.lru_cache(maxsize=None)
def elementwise_loop_n(fn, arity: int):
    """A compiled loop applying the scalar form ``fn`` of ``arity`` operands to every element
    of equally long 1-d arrays, as the generated kernels call it. One loop per ``(fn,
    arity)`` in a process: numba compiles each new loop again, callee included (seconds for
    an iterative form), so the tests measuring one form share its loop (numba still
    specializes it per argument dtype)."""
    from numba import njit
    if arity == 1:
        @njit(error_model="numpy")
        def run1(a):
            out = np.empty_like(a)
            for i in range(a.size):
                out[i] = fn(a[i])
            return out
        return run1
    if arity == 2:
        @njit(error_model="numpy")
        def run2(a, b):
            out = np.empty_like(a)
            for i in range(a.size):
                out[i] = fn(a[i], b[i])
            return out
        return run2

    @njit(error_model="numpy")
    def run3(a, b, c):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = fn(a[i], b[i], c[i])
        return out
    return run3


def reference(case: Case, *args: np.ndarray) -> np.ndarray:
    """``case``'s value at the float64 ``args`` on the NumPy backend, in float64."""
    with plax.config.override("jax_enable_x64", True):
        return np.asarray(plax.jit(case.lax_fn, backend="numpy")(*args))


def max_ulps(got: np.ndarray, ref: np.ndarray, dtype) -> float:
    """Largest ``|got - ref|`` in ulps of ``dtype`` at ``ref`` (float64), where ``ref`` is
    finite in ``dtype``. Below the smallest normal number the unit is that number itself
    (absolute error there: SciPy flushes some subnormal results to zero, plax keeps them)."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):
        r = np.abs(ref).astype(dtype)
    ok = np.isfinite(r)
    if not ok.any():
        return 0.0
    tiny = np.finfo(dtype).tiny
    spacing = np.maximum(np.spacing(r[ok]).astype(np.float64), float(tiny))
    return float((np.abs(got[ok].astype(np.float64) - ref[ok]) / spacing).max())


def same_specials(got: np.ndarray, ref: np.ndarray) -> bool:
    """Whether NaN and the infinities (of ``ref`` rounded to ``got``'s dtype) are in the same
    places, with the same signs."""
    with np.errstate(over="ignore"):
        r = ref.astype(got.dtype)
    inf = np.isinf(r)
    return bool(np.array_equal(np.isnan(got), np.isnan(r)) and np.array_equal(got[inf], r[inf]))


def jax_errors(case: Case, n: int = 20_000):
    """JAX's error on ``case``'s sweep: (float32 ulps, float64 ulps), or None without JAX."""
    try:
        import jax
    except ImportError:
        return None
    args = case.jax_args(np.random.default_rng(0), n)
    fn = jax.jit(getattr(jax.lax, case.name))
    out = []
    for dtype in (np.float32, np.float64):
        jax.config.update("jax_enable_x64", dtype == np.float64)
        try:
            cast = [a.astype(dtype) for a in args]
            want = reference(case, *[c.astype(np.float64) for c in cast])
            got = np.asarray(fn(*cast)).astype(np.float64)
            out.append(max_ulps(got, want, dtype))
        finally:
            jax.config.update("jax_enable_x64", False)
    return tuple(out)


def measure(n: int = 20_000) -> dict[str, tuple]:
    """Per case: plax's float32 and float64 errors on its sweep (the scalar forms in a
    compiled loop) and JAX's (None without JAX)."""
    rows = {}
    for name, case in CASES.items():
        args = case.args(np.random.default_rng(0), n)
        errs = []
        for bits, dtype in ((32, np.float32), (64, np.float64)):
            if bits == 32 and case.bound32 is None:
                errs.append(None)
                continue
            cast = [a.astype(dtype) for a in args]
            got = elementwise_loop_n(case.scalar_form(bits), len(cast))(*cast)
            errs.append(max_ulps(got, reference(case, *[c.astype(np.float64) for c in cast]),
                                 dtype))
        rows[name] = (*errs, jax_errors(case, n))
    return rows


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    for name, (e32, e64, j) in measure().items():
        print(f"{name:18s} plax f32 {e32}  f64 {e64}  jax (f32, f64) {j}")

"""The Array API 2023.12 special cases of elementwise functions for complex operands, value by
value, from the table in ``special_cases_complex.py`` (one test per sentence of the standard,
its wording in the test id), for complex64 and complex128 operands through plax.numpy. Each
component is checked on its own: zeros and infinities with their sign (``np.signbit``), NaN as
any NaN, ``pm(...)`` with either sign. Rows where JAX deviates check JAX's result instead (plax
keeps JAX's behaviour) and, where JAX is installed, that JAX gives it."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp

from special_cases import approx
from special_cases_complex import ANY, COMPLEX_ROWS, CRow, pm

DTYPES = [np.complex64, np.complex128]


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _complex(pairs, dtype):
    real = np.finfo(dtype).dtype
    a = np.array([p[0] for p in pairs], dtype=real)
    b = np.array([p[1] for p in pairs], dtype=real)
    z = np.empty(a.shape, dtype=dtype)
    z.real, z.imag = a, b
    return z


def _operands(row: CRow, dtype):
    x1 = _complex(row.x1, dtype)
    if row.x2 is None:
        return x1, None
    x2 = _complex(row.x2, dtype)
    if row.paired:
        return x1, x2
    i, j = np.meshgrid(np.arange(x1.size), np.arange(x2.size), indexing="ij")
    return x1[i.ravel()], x2[j.ravel()]


def _parts(x1, x2):
    parts = (x1.real.copy(), x1.imag.copy())
    if x2 is not None:
        parts += (x2.real.copy(), x2.imag.copy())
    return parts


def _call(ns, row: CRow, x1, x2):
    fn = getattr(ns, row.func)
    if x2 is None:
        return fn(ns.asarray(x1))
    return fn(ns.asarray(x1), ns.asarray(x2))


def _same(got, want, where):
    """Equal values, NaN as any NaN, zeros and infinities with their sign."""
    want = np.broadcast_to(np.asarray(want, dtype=got.dtype), got.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=where)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok], err_msg=where)
    assert (np.signbit(got[ok]) == np.signbit(want[ok])).all(), f"sign: {where}"


def _close(got, want, where):
    """Close to ``want`` (relative to the largest of the values, so that a component which
    rounds to a tiny number instead of 0 passes)."""
    want = np.broadcast_to(np.asarray(want, dtype=got.dtype), got.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale, err_msg=where)


def _check_component(spec, got, parts, where):
    if spec is ANY:
        return
    if isinstance(spec, pm):
        value = spec.value
        if isinstance(value, approx):
            _close(np.abs(got), abs(value.value), where)
        else:
            _same(np.abs(got), abs(value), where)
        return
    if isinstance(spec, approx):
        value = spec.value(*parts) if callable(spec.value) else spec.value
        _close(got, value, where)
        return
    if callable(spec):
        with np.errstate(all="ignore"):
            _same(got, spec(*parts), where)
        return
    _same(got, spec, where)


def _check(ns, row: CRow, result, got, x1, x2):
    got = np.asarray(got)
    where = (f"{row.func}: {row.wording} x1={x1.tolist()} "
             f"x2={None if x2 is None else x2.tolist()} got={got.tolist()}")
    parts = _parts(x1, x2)
    if row.namespace_result is not None:
        want = np.asarray(getattr(ns, row.namespace_result)(ns.asarray(x1), ns.asarray(x1)))
        assert got.dtype == want.dtype, where
        _same(got.real, want.real, where)
        _same(got.imag, want.imag, where)
        return
    if isinstance(result, tuple):
        assert got.dtype == x1.dtype, where
        _check_component(result[0], got.real, parts, f"real part: {where}")
        _check_component(result[1], got.imag, parts, f"imaginary part: {where}")
        return
    if isinstance(result, bool) or got.dtype == np.bool_:
        assert got.dtype == np.bool_, where
        want = result(*parts) if callable(result) else np.full(got.shape, result)
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    # a real-valued result (abs)
    assert got.dtype == x1.real.dtype, where
    _check_component(result, got, parts, where)


def _id(row: CRow) -> str:
    return f"{row.func}[complex]: {row.wording}"


@pytest.mark.parametrize("row", COMPLEX_ROWS, ids=_id)
def test_complex_special_case(row: CRow):
    for dtype in DTYPES:
        x1, x2 = _operands(row, dtype)
        result = row.jax if row.jax is not None else row.result
        _check(jnp, row, result, _call(jnp, row, x1, x2), x1, x2)


JAX_ROWS = [r for r in COMPLEX_ROWS if r.jax is not None]


@pytest.mark.parametrize("row", JAX_ROWS, ids=_id)
def test_complex_deviation_is_jax_behaviour(row: CRow):
    """Each deviation from the standard is JAX's own behaviour, with a reason."""
    assert row.why.strip()
    jax = pytest.importorskip("jax", reason="cross-check with JAX (not installed in CI)")
    import jax.numpy as jjnp
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        for dtype in DTYPES:
            x1, x2 = _operands(row, dtype)
            _check(jjnp, row, row.jax, _call(jjnp, row, x1, x2), x1, x2)
    finally:
        jax.config.update("jax_enable_x64", old)


def test_complex_table_is_substantial():
    funcs = {r.func for r in COMPLEX_ROWS}
    assert len(COMPLEX_ROWS) >= 250 and len(funcs) >= 30
    for name in funcs:
        assert hasattr(jnp, name), name
    # every sentence once per function
    seen = [(r.func, r.wording) for r in COMPLEX_ROWS]
    assert not {s for s in seen if seen.count(s) > 1}

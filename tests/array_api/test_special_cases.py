"""The Array API 2023.12 special cases of elementwise functions, value by value, from the table
in ``special_cases.py`` (one test per sentence of the standard, its wording in the test id),
for float32 and float64 operands through plax.numpy (the namespace ``__array_namespace__``
returns). Rows where JAX deviates check JAX's result instead (plax keeps JAX's behaviour) and,
where JAX is installed, that JAX gives it."""
from __future__ import annotations


import numpy as np
import pytest

import plax
from plax import numpy as jnp

from special_cases import (ABS_X1, ABS_X2, NEG_ABS_X1, NEGATIVE, POSITIVE, ROWS, SIGNED_INF,
                           X1, X2, ZERO, Row, approx)

DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _operands(row: Row, dtype):
    x1 = np.asarray(row.x1, dtype=dtype)
    if row.x2 is None:
        return x1, None
    x2 = np.asarray(row.x2, dtype=dtype)
    if row.kwargs.get("paired"):
        return x1, x2
    a, b = np.meshgrid(x1, x2, indexing="ij")
    return a.ravel(), b.ravel()


def _call(ns, row: Row, x1, x2):
    kwargs = {k: v for k, v in row.kwargs.items() if k != "paired"}
    fn = getattr(ns, row.func)
    if x2 is None:
        if row.func == "clip":
            dt = x1.dtype
            return fn(ns.asarray(x1), min=ns.asarray(kwargs["min"], dtype=dt),
                      max=ns.asarray(kwargs["max"], dtype=dt))
        return fn(ns.asarray(x1), **kwargs)
    return fn(ns.asarray(x1), ns.asarray(x2), **kwargs)


def _expected(result, x1, x2):
    """The required values for each operand pair (NaN where only a sign is prescribed)."""
    with np.errstate(all="ignore"):
        table = {X1: lambda: x1, X2: lambda: x2, ABS_X1: lambda: np.abs(x1),
                 ABS_X2: lambda: np.abs(x2), NEG_ABS_X1: lambda: -np.abs(x1),
                 "x": lambda: x1, "x*x": lambda: x1 * x1, "x1+(-x2)": lambda: x1 + (-x2),
                 "round_half_even": lambda: np.round(x1), "max": lambda: np.maximum(x1, x2),
                 "min": lambda: np.minimum(x1, x2), "isnan": lambda: np.isnan(x1),
                 "isinf": lambda: np.isinf(x1), "isfinite": lambda: np.isfinite(x1)}
        if isinstance(result, str) and result in table:
            return np.asarray(table[result]())
    return None


def _check(row: Row, result, got, x1, x2):
    got = np.asarray(got)
    where = f"{row.func}: {row.wording} x1={x1.tolist()} x2={None if x2 is None else x2.tolist()}"
    if isinstance(result, bool):
        np.testing.assert_array_equal(got, np.full(got.shape, result), err_msg=where)
        return
    if isinstance(result, approx):
        np.testing.assert_allclose(got, np.full(got.shape, result.value), rtol=2e-7, err_msg=where)
        return
    if result in (POSITIVE, NEGATIVE):
        sign = np.signbit(got)
        assert not np.isnan(got).any() and (sign == (result == NEGATIVE)).all(), where
        return
    if result == SIGNED_INF:
        want_neg = np.signbit(x1) != np.signbit(x2)
        assert np.isinf(got).all() and (np.signbit(got) == want_neg).all(), where
        return
    if result == ZERO:
        assert (got == 0).all(), where
        return
    if result == "sign_of_x2":
        with np.errstate(all="ignore"):
            want = x1 - np.floor(x1 / x2) * x2
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=where)
        nonzero = got != 0
        assert (np.signbit(got[nonzero]) == np.signbit(x2[nonzero])).all(), where
        return
    want = _expected(result, x1, x2)
    if want is None:
        want = np.full(got.shape, result, dtype=got.dtype)
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=where)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok].astype(got.dtype), err_msg=where)
    # zeros and infinities with their signs
    assert (np.signbit(got[ok]) == np.signbit(want[ok])).all(), f"sign of zero: {where}"


def _id(row: Row) -> str:
    return f"{row.func}: {row.wording}"


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_special_case(row: Row):
    for dtype in DTYPES:
        x1, x2 = _operands(row, dtype)
        got = _call(jnp, row, x1, x2)
        result = row.jax if row.jax is not None else row.result
        _check(row, result, got, x1, x2)


JAX_ROWS = [r for r in ROWS if r.jax is not None]


@pytest.mark.parametrize("row", JAX_ROWS, ids=_id)
def test_deviation_is_jax_behaviour(row: Row):
    """Each deviation from the standard is JAX's own behaviour, with a reason."""
    assert row.why.strip()
    jax = pytest.importorskip("jax", reason="cross-check with JAX (not installed in CI)")
    import jax.numpy as jjnp
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        for dtype in DTYPES:
            x1, x2 = _operands(row, dtype)
            _check(row, row.jax, _call(jjnp, row, x1, x2), x1, x2)
    finally:
        jax.config.update("jax_enable_x64", old)


def test_table_is_substantial():
    funcs = {r.func for r in ROWS}
    assert len(ROWS) >= 200 and len(funcs) >= 40
    for name in funcs:
        assert hasattr(jnp, name), name

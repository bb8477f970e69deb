"""Result dtypes, weak types, shapes and values of a representative table of expressions
(jnp_dtype_table.py) equal JAX's, as recorded by record_jax_dtypes.py in jax_dtype_table.json;
when JAX is installed, the recording is also checked to be current."""
from __future__ import annotations

import json
import pathlib
import warnings

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_dtype_table import EXPRESSIONS
from jnp_testutil import jax, jax_numpy

RECORDED = json.loads((pathlib.Path(__file__).parent / "jax_dtype_table.json").read_text())


def _evaluate(numpy_module, expr):
    env = {"jnp": numpy_module, "np": np, "bf16": ml_dtypes.bfloat16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return eval(expr, env)  # noqa: S307 - the test's own table


def _describe(out):
    from record_jax_dtypes import flat_values
    return [{"dtype": str(np.dtype(o.dtype)), "weak_type": bool(o.weak_type),
             "shape": list(o.shape), "value": flat_values(o)}
            for o in plax.tree_util.tree_leaves(out)]


def test_table_is_recorded_for_every_expression():
    assert sorted(RECORDED["results"]) == sorted(EXPRESSIONS)


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_dtype_and_weak_type_like_jax(expr):
    got = _describe(_evaluate(jnp, expr))
    expected = RECORDED["results"][expr]
    assert [(g["dtype"], g["weak_type"], g["shape"]) for g in got] == \
        [(e["dtype"], e["weak_type"], e["shape"]) for e in expected], expr
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g["value"], np.float64),
                                   np.asarray(e["value"], np.float64), rtol=1e-6, atol=1e-6,
                                   err_msg=expr)


@pytest.mark.skipif(jax is None, reason="jax is not installed (the recording is used instead)")
@pytest.mark.skipif(jax is not None and jax.__version__ != RECORDED["jax_version"],
                    reason="the table was recorded with another JAX version")
def test_recording_matches_installed_jax():
    for expr in EXPRESSIONS:
        try:  # abstract evaluation: no compilation
            out = jax.eval_shape(lambda: _evaluate(jax_numpy, expr))  # noqa: B023
        except jax.errors.ConcretizationTypeError:
            out = _evaluate(jax_numpy, expr)
        live = [(str(np.dtype(o.dtype)), bool(o.weak_type)) for o in jax.tree_util.tree_leaves(out)]
        assert live == [(d["dtype"], d["weak_type"]) for d in RECORDED["results"][expr]], expr

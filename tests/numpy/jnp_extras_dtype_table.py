"""Expressions whose result dtype, weak type, shape and values must be JAX's, for the
statistics, histogram, polynomial, calculus, math-extra and window functions of plax.numpy.

Grouped by test module; each entry is Python source evaluated with ``jnp`` bound to plax.numpy
(or to jax.numpy when ``record_jax_extras_dtypes.py`` records ``jax_extras_dtype_table.json``),
``np`` to NumPy and ``bf16`` to ml_dtypes.bfloat16.
"""
from __future__ import annotations

import json
import pathlib
import warnings

import ml_dtypes
import numpy as np

HERE = pathlib.Path(__file__).parent
RECORDING = HERE / "jax_extras_dtype_table.json"

_F = "np.array([3., 1., 4., 1.5, 9., 2.7])"  # no value on a float32 bin edge
_I8 = "np.array([3, 1, 4, 1, 5, 9], np.int8)"

EXPRESSIONS = {
    "statistics": [
        f"jnp.median({_F})", f"jnp.median({_I8})", "jnp.median(3.0)", "jnp.median(3)",
        f"jnp.median({_F}.astype(np.float16))", f"jnp.median({_F}.astype(bf16))",
        f"jnp.nanmedian({_F})", f"jnp.quantile({_I8}, 0.3)",
        f"jnp.quantile({_F}, np.array([0.1, 0.7]), method='nearest')",
        f"jnp.quantile({_F}.reshape(2, 3), 0.5, axis=1, keepdims=True, method='lower')",
        f"jnp.quantile({_F}, 0.4, method='inverted_cdf', weights=np.arange(6.))",
        f"jnp.percentile({_I8}, 30)", f"jnp.percentile({_F}, np.array([10, 90]), "
                                      "method='higher')",
        f"jnp.nanpercentile({_F}.astype(np.float16), 50., method='midpoint')",
        f"jnp.nanquantile({_F}, 0.25)", f"jnp.nanargmax({_F})", f"jnp.nanargmin({_I8})",
        f"jnp.nancumsum({_I8})", "jnp.nancumsum(np.ones(3, bool))",
        f"jnp.nancumprod({_F}.astype(np.float16))", f"jnp.cov({_I8})",
        f"jnp.cov({_F}.reshape(2, 3))", f"jnp.cov({_F}.reshape(2, 3), bias=True)",
        f"jnp.cov({_F}.astype(np.complex64))", f"jnp.corrcoef({_I8})",
        f"jnp.corrcoef({_F}.reshape(3, 2), rowvar=False)",
    ],
    "histograms": [
        "jnp.bincount(np.array([0, 1, 1, 3]))", "jnp.bincount(np.array([0, 1, 1, 3], np.uint8))",
        "jnp.bincount(np.array([0, 1, 1, 3]), weights=np.ones(4, np.float16))",
        "jnp.bincount(np.array([0, 1, 1, 3]), minlength=6)",
        "jnp.bincount(np.array([0, 1, 1, 3]), length=3)",
        "jnp.digitize(np.array([0.5, 1.5]), np.array([0., 1., 2.]))",
        "jnp.digitize(np.array([1, 5], np.int8), np.array([0, 3]), right=True)",
        f"jnp.histogram({_F})", f"jnp.histogram({_I8}, bins=3)",
        f"jnp.histogram({_F}.astype(np.float16), bins=2, density=True)",
        f"jnp.histogram({_F}, bins=np.array([0., 2., 5., 10.]), weights={_I8})",
        f"jnp.histogram_bin_edges({_I8}, bins=4)",
        f"jnp.histogram_bin_edges({_F}, bins=3, range=(0, 6))",
        f"jnp.histogram2d({_F}, {_F}[::-1], bins=2)",
        f"jnp.histogram2d({_I8}, {_I8}, bins=[2, 3])",
        f"jnp.histogramdd({_F}.reshape(3, 2), bins=2)",
    ],
    "polynomial": [
        "jnp.poly(np.array([1, 2]))", "jnp.poly(np.array([1., 2.], np.float16))",
        "jnp.poly(np.array([[1., 0.], [0., 2.]]))", "jnp.poly(np.array([1+1j, 1-1j]))",
        "jnp.polyadd(np.array([1, 2], np.int8), np.array([1.]))",
        "jnp.polyadd(np.array([1, 2], np.int8), np.array([1], np.int8))",
        "jnp.polysub(np.array([1, 2, 3]), np.array([4, 5]))",
        "jnp.polymul(np.array([1, 2]), np.array([1, 3]))",
        "jnp.polymul(np.array([0., 1., 2.]), np.array([1., 3.]))",
        "jnp.polydiv(np.array([1, 2]), np.array([1, 3]))",
        "jnp.polydiv(np.array([1., 2., 3.]), np.array([2., 1.]))",
        "jnp.polyder(np.array([1, 2, 3], np.int8))", "jnp.polyder(np.array([1., 2., 3.]), 2)",
        "jnp.polyint(np.array([1, 2, 3], np.int8))",
        "jnp.polyint(np.array([1., 2., 3.]), 2, k=np.array([1., 2.]))",
        "jnp.polyval(np.array([1, 2], np.int8), np.int8(3))",
        "jnp.polyval(np.array([1, 2]), 2.5)", "jnp.polyval(np.array([1., 2.]), np.arange(3))",
        "jnp.polyfit(np.arange(5.), np.arange(5.) ** 2, 2)",
        "jnp.roots(np.array([1, -3, 2]))", "jnp.roots(np.array([0., 1., -3., 2.]))",
    ],
    "calculus": [
        "jnp.diff(np.array([1, 4, 9], np.uint8))", "jnp.diff(np.array([True, False, True]))",
        "jnp.diff(np.array([1., 4., 9.]), n=2)",
        "jnp.diff(np.array([1, 4, 9], np.int8), prepend=0, append=np.array([20]))",
        "jnp.ediff1d(np.array([1, 4, 9], np.int16), to_begin=-1, to_end=np.array([7, 8]))",
        "jnp.gradient(np.array([1, 4, 9, 16]))",
        "jnp.gradient(np.array([1., 4., 9., 16.], np.float16), 2.)",
        "jnp.gradient(np.arange(12.).reshape(3, 4) ** 2, np.array([0., 1., 3.]), 0.5)",
        "jnp.trapezoid(np.array([1, 2, 3]))", "jnp.trapezoid(np.array([1., 2., 3.]), dx=0.5)",
        "jnp.trapezoid(np.array([1., 2., 4.], np.float16), np.array([0., 1., 3.]))",
        "jnp.unwrap(np.array([0., 3., 6.5]))", "jnp.unwrap(np.array([0, 5, 10]), period=6)",
        "jnp.unwrap(np.array([0., 3., 6.5], np.float16), period=4.)",
        "jnp.interp(np.array([0.5, 3.]), np.array([0., 1., 2.]), np.array([0., 10., 5.]))",
        "jnp.interp(np.array([1, 3]), np.array([0, 1, 2]), np.array([0, 10, 5]))",
        "jnp.interp(2.5, np.array([0., 1., 2.]), np.array([0., 10., 5.], np.float16), "
        "left=-1., right=-2.)",
        "jnp.interp(np.array([-1., 0.5, 3.]), np.array([0., 1., 2.]), np.array([0., 10., 5.]), "
        "period=2.)",
    ],
    "math_extras": [
        "jnp.frexp(np.array([8., 0.75, -3.]))", "jnp.frexp(np.array([1, 6], np.int8))",
        "jnp.frexp(np.array([8., 0.75], np.float16))", "jnp.frexp(2.0)",
        "jnp.ldexp(np.array([0.5, 3.]), np.array([4, -1]))",
        "jnp.ldexp(np.ones(3, np.float16), np.int32(2))", "jnp.ldexp(np.ones(3, np.int32), 2)",
        "jnp.ldexp(2.0, 3)", "jnp.gcd(np.int8(4), 6)", "jnp.gcd(4, 6)",
        "jnp.gcd(np.array([12, -8, 0]), np.array([18, 6, 0]))",
        "jnp.lcm(np.uint8(4), np.int8(6))", "jnp.lcm(np.array([4, -6, 0]), 6)",
        "jnp.modf(np.array([2.5, -1.25]))", "jnp.modf(np.ones(2, np.int32))", "jnp.modf(2.5)",
        "jnp.spacing(np.array([1., -1., 0.], np.float16))", "jnp.spacing(np.array([1., -1.]))",
        "jnp.spacing(2)", "jnp.fabs(np.array([-2, 3], np.int8))", "jnp.fabs(-2)",
        "jnp.fabs(np.array([-1.5], bf16))", "jnp.pow(2, 3)",
        "jnp.pow(np.array([2., 3.]), np.int8(2))",
        "jnp.bitwise_count(np.array([-3, -128, 7], np.int8))",
        "jnp.bitwise_count(np.uint32(7))", "jnp.bitwise_count(5)",
        "jnp.bitwise_count(np.array([True, False]))",
        "jnp.i0(np.array([0., 1., -2.]))", "jnp.i0(np.int8(3))", "jnp.i0(2.0)",
        "jnp.sort_complex(np.array([3, 1, 2], np.int8))",
        "jnp.sort_complex(np.array([1+1j, 1-1j, 0.5+0j]))",
        "jnp.matvec(np.ones((2, 3)), np.arange(3, dtype=np.int32))",
        "jnp.matvec(np.ones((4, 2, 3), np.int8), np.arange(3, dtype=np.int8))",
        "jnp.vecmat(np.array([1., 2., 3.]), np.ones((3, 2)))",
        "jnp.vecmat(np.array([1j, 2., 3.]), np.ones((2, 3, 2)))",
    ],
    "window_functions": [
        "jnp.bartlett(5)", "jnp.blackman(4)", "jnp.hamming(1)", "jnp.hanning(0)",
        "jnp.hanning(6)", "jnp.kaiser(4, 2)", "jnp.kaiser(5, 8.6)",
    ],
}

# roots come in an unspecified order: only dtype, weak type and shape are compared
UNORDERED = {e for e in EXPRESSIONS["polynomial"] if e.startswith("jnp.roots")}


def flat_values(x) -> list:
    """The values of ``x`` as a flat list of floats (complex numbers as [re, im] pairs)."""
    x = np.asarray(x)
    if np.iscomplexobj(x):
        return [[float(v.real), float(v.imag)] for v in x.reshape(-1)]
    return x.astype(np.float64).reshape(-1).tolist()


def evaluate(numpy_module, expr: str):
    env = {"jnp": numpy_module, "np": np, "bf16": ml_dtypes.bfloat16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return eval(expr, env)  # noqa: S307 - the table's own source


def check_like_recorded(group_expr: str, describe) -> None:
    """Asserts plax's result for ``group_expr`` has the recorded JAX dtypes, weak types,
    shapes and (but for unordered results) values; ``describe`` lists the output leaves."""
    import plax.numpy as jnp
    recorded = json.loads(RECORDING.read_text())["results"][group_expr]
    got = describe(evaluate(jnp, group_expr))
    assert [(g["dtype"], g["weak_type"], g["shape"]) for g in got] == \
        [(e["dtype"], e["weak_type"], e["shape"]) for e in recorded], group_expr
    if group_expr in UNORDERED:
        return
    for g, e in zip(got, recorded):
        np.testing.assert_allclose(np.asarray(g["value"], np.float64),
                                   np.asarray(e["value"], np.float64), rtol=2e-3, atol=1e-5,
                                   err_msg=group_expr)


def describe_plax(out) -> list:
    import plax
    return [{"dtype": str(np.dtype(o.dtype)), "weak_type": bool(o.weak_type),
             "shape": list(o.shape), "value": flat_values(o)}
            for o in plax.tree_util.tree_leaves(out)]

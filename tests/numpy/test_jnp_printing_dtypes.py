"""Printing helpers, print options, isdtype/iterable/einsum_path, the bool/object_/
ComplexWarning aliases and the ml_dtypes low-precision scalar types."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import plax.numpy as jnp


def test_array_repr_str_and_printoptions():
    x = jnp.array([1.0, 2.0])
    assert jnp.array_repr(x) == "Array([1., 2.], dtype=float32)"
    assert jnp.array_str(x) == "[1. 2.]"
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
        assert jnp.array_str(jnp.array([1 / 3])) == "[0.33]"
    old = jnp.get_printoptions()["precision"]
    jnp.set_printoptions(precision=3)
    try:
        assert jnp.get_printoptions()["precision"] == 3
    finally:
        jnp.set_printoptions(precision=old)


@pytest.mark.parametrize("dtype,kind,expected", [
    (jnp.bfloat16, "real floating", True), (jnp.int8, "signed integer", True),
    (jnp.uint8, "signed integer", False), (jnp.uint8, ("bool", "integral"), True),
    (jnp.complex64, "numeric", True), (jnp.bool_, "bool", True),
    (jnp.float32, jnp.float32, True), (jnp.float32, jnp.float64, False)])
def test_isdtype(dtype, kind, expected):
    assert jnp.isdtype(dtype, kind) is expected


def test_misc_names():
    with pytest.raises(ValueError):
        jnp.isdtype(jnp.float32, "floating point")
    assert jnp.iterable(jnp.ones(2)) and not jnp.iterable(jnp.ones(()))
    assert jnp.bool is jnp.bool_ and jnp.bool(1).dtype == np.bool_
    assert jnp.object_ is np.object_ and issubclass(jnp.ComplexWarning, Warning)
    path, text = jnp.einsum_path("ij,jk,kl->il", jnp.ones((2, 3)), jnp.ones((3, 4)),
                                 jnp.ones((4, 5)))
    assert path == np.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)),
                                  np.ones((4, 5)), optimize="greedy")[0][1:]
    assert "Complete contraction" in text


LOW_PRECISION = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                 "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int1", "int2", "int4",
                 "uint1", "uint2", "uint4"]


@pytest.mark.parametrize("name", LOW_PRECISION)
def test_low_precision_types(name):
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"installed ml_dtypes lacks {name}")
    t = getattr(jnp, name)
    assert np.dtype(t) == np.dtype(getattr(ml_dtypes, name))
    assert t == getattr(ml_dtypes, name)

"""Scalar types (``jnp.float32``, ``jnp.int8``, ...): dtypes you can also call to make arrays.

``jnp.float32(1.0)`` returns a rank-0 plax Array, ``np.dtype(jnp.float32)`` is
``float32``, and ``x.astype(jnp.bfloat16)`` works, as in JAX.
"""
from __future__ import annotations

import numpy as np

from plax import dtypes


_DTYPE_SPECIFIERS = (np.dtype, type)


class _ScalarMeta(type):
    def __eq__(cls, other):
        if cls is other:
            return True
        if isinstance(other, _ScalarMeta):
            return cls.dtype == other.dtype
        # As in JAX (and NumPy's scalar types): a dtype or a type (np.float32, float, an
        # ml_dtypes or JAX scalar type) may equal this type; a string ("float32"), an array
        # (whose .dtype np.dtype() would pick up), a scalar or a list never does.
        if not isinstance(other, _DTYPE_SPECIFIERS):
            return False
        # == must never raise (x in list_of_dtypes, dict keys): np.dtype() of an arbitrary
        # type raises TypeError, and a few other errors for exotic ones.
        try:
            return cls.dtype == np.dtype(other)
        except Exception:
            return False

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __repr__(cls):
        return f"<class 'plax.numpy.{cls.dtype.name}'>"

    def __call__(cls, x=0):
        from plax.numpy.creation import array
        return array(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)


def _make(name: str, dtype: np.dtype) -> type:
    return _ScalarMeta(name, (), {"dtype": dtype, "__doc__": f"The {dtype.name} scalar type."})


bool_ = _make("bool_", dtypes.bool_)
int8 = _make("int8", dtypes.int8)
int16 = _make("int16", dtypes.int16)
int32 = _make("int32", dtypes.int32)
int64 = _make("int64", dtypes.int64)
uint8 = _make("uint8", dtypes.uint8)
uint16 = _make("uint16", dtypes.uint16)
uint32 = _make("uint32", dtypes.uint32)
uint64 = _make("uint64", dtypes.uint64)
bfloat16 = _make("bfloat16", dtypes.bfloat16)
float16 = _make("float16", dtypes.float16)
float32 = _make("float32", dtypes.float32)
float64 = _make("float64", dtypes.float64)
complex64 = _make("complex64", dtypes.complex64)
complex128 = _make("complex128", dtypes.complex128)

# JAX's default-width aliases follow the x64 flag at call time; these names are the
# 64-bit types, canonicalised when used (as JAX's int_/float_ are).
int_ = int64
uint = uint64
float_ = float64
complex_ = complex128
single = float32
double = float64
csingle = complex64
cdouble = complex128
half = float16

# The low-precision types JAX exports (from ml_dtypes, where the installed version has them).
# They are dtypes only: plax arrays do not hold them (calling one raises TypeError).
import ml_dtypes as _ml_dtypes  # noqa: E402

_LOW_PRECISION = ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                  "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                  "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int1", "int2", "int4",
                  "uint1", "uint2", "uint4")
for _name in _LOW_PRECISION:
    if hasattr(_ml_dtypes, _name):
        globals()[_name] = _make(_name, np.dtype(getattr(_ml_dtypes, _name)))
del _name

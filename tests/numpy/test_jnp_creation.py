"""Array creation: array/asarray typing rules, zeros/ones/full/empty and *_like, arange,
linspace/logspace/geomspace, eye/identity/tri, meshgrid, indices, scalar types, from_dlpack.
Values against NumPy, dtypes and weak types against JAX."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import (assert_aval, assert_close, bfloat16, check_avals_like_jax,
                          jax_fn)

_ARRAY_CASES = [
    ([1, 2.0],), ([1, 2],), ([True, False],), (1.5,), (3,), (True,), ([],), (2j,), ([1, 2j],),
    ([[1, 2], [3, 4]],), ((1, 2.5),), ([np.int8(1), 2],), ([np.float16(1), 2.5],),
    ([np.uint8(1), np.int8(-1)],), (np.float64(2.0),), (np.array([1, 2], np.int64),),
    (np.array([1.0], np.float64),), (np.array(3, np.uint16),), ([np.array([1, 2], np.int16), [3, 4]],),
    (np.zeros((2, 0)),), (np.array([1, 2], dtype=bfloat16),),
]


@pytest.mark.parametrize("args", _ARRAY_CASES, ids=[repr(a[0])[:30] for a in _ARRAY_CASES])
@pytest.mark.parametrize("name", ["array", "asarray"])
def test_array_typing_like_jax(name, args):
    out = getattr(jnp, name)(*args)
    check_avals_like_jax(out, jax_fn(name), *args)
    expected = np.array(args[0]) if not isinstance(args[0], np.ndarray) else args[0]
    assert_close(out, expected.astype(np.asarray(out).dtype) if expected.size else
                 np.zeros(expected.shape, np.asarray(out).dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, bfloat16, np.float32,
                                   np.complex64, np.bool_, int, float])
def test_array_dtype_and_ndmin(dtype):
    data = [[1, 0], [2, 3]]
    out = jnp.array(data, dtype=dtype)
    check_avals_like_jax(out, jax_fn("array"), data, dtype=dtype)
    assert_close(out, np.array(data).astype(np.asarray(out).dtype))
    out = jnp.array(data, dtype=dtype, ndmin=4)
    assert out.shape == (1, 1, 2, 2)
    out = jnp.asarray(5, dtype=dtype)
    check_avals_like_jax(out, jax_fn("asarray"), 5, dtype=dtype)


def test_array_of_arrays_and_tracers():
    x = jnp.array([1.0, 2.0])
    assert jnp.asarray(x) is x  # no copy when nothing changes
    nested = jnp.array([x, x * 2])
    assert_close(nested, np.array([[1.0, 2.0], [2.0, 4.0]]))
    out = plax.jit(lambda a: jnp.array([a, 1.0, a * 3]))(jnp.float32(2.0))
    assert_close(out, np.array([2.0, 1.0, 6.0], np.float32))
    out = plax.jit(lambda a: jnp.array([[a, a], [a, a]]))(jnp.int8(3))
    assert_aval(out, np.int8, shape=(2, 2))


def test_array_rejects_ragged_and_objects():
    with pytest.raises(ValueError, match="rectangular"):
        jnp.array([[1, 2], [3]])
    with pytest.raises(TypeError):
        jnp.array(["a", "b"])
    with pytest.raises(TypeError):
        jnp.array([object()])
    with pytest.raises(OverflowError):
        jnp.array([2 ** 40])
    with pytest.raises(OverflowError):
        jnp.array(2 ** 40)


_ARANGE = [((5,), {}), ((2, 7), {}), ((2, 7, 2), {}), ((1.0, 5), {}), ((0, 1, 0.1), {}),
           ((5,), {"dtype": np.float32}), ((10, 2, -3), {}), ((np.int8(5),), {}), ((2.5,), {}),
           ((0, 5, 1.5), {}), ((5,), {"dtype": np.uint8}), ((3, 1), {}), ((-1, -5, -1), {}),
           ((5,), {"dtype": bfloat16}), ((0, 2, 0.5), {"dtype": np.float16}),
           ((np.float32(1), 4), {}), ((0, 10, 3), {"dtype": np.int16})]


@pytest.mark.parametrize("args,kwargs", _ARANGE, ids=[f"{a}-{k}" for a, k in _ARANGE])
def test_arange(args, kwargs):
    out = jnp.arange(*args, **kwargs)
    check_avals_like_jax(out, jax_fn("arange"), *args, concrete=True, **kwargs)
    ref_dtype = np.asarray(out).dtype
    ref = np.arange(*[np.float64(a) if isinstance(a, (float, np.floating)) else a for a in args],
                    dtype=np.float64 if ref_dtype.kind == "f" or ref_dtype == bfloat16 else None)
    if "dtype" in kwargs and np.dtype(kwargs["dtype"]).kind in "iu":
        ref = np.arange(*args, dtype=kwargs["dtype"])
    assert_close(out, ref.astype(np.float64 if ref_dtype.kind == "f" or ref_dtype == bfloat16
                                 else ref_dtype), dtype=ref_dtype)


def test_arange_errors_and_tracers():
    with pytest.raises(ZeroDivisionError, match="step"):  # JAX's type (issue 25)
        jnp.arange(0, 5, 0)
    with pytest.raises(plax.errors.ConcretizationTypeError):
        plax.jit(lambda n: jnp.arange(n))(3)
    assert_close(jnp.arange(jnp.asarray(4)), np.arange(4))


_LINSPACE = [((0, 1), {}), ((0, 1, 5), {}), ((0, 10, 5), {"dtype": np.int32}),
             ((1, 2, 4), {"endpoint": False}), ((2.0, 3.0, 5), {"retstep": True}),
             ((np.array([0.0, 1.0], np.float32), np.array([1.0, 3.0], np.float32), 3), {}),
             ((np.array([0.0, 1.0], np.float32), 5.0, 4), {"axis": 1}),
             ((np.array([[0.0], [1.0]], np.float32), np.array([2.0, 3.0], np.float32), 3),
              {"axis": -1}),
             ((0, 1, 1), {}), ((0, 1, 0), {}), ((0, 1, 3), {"dtype": np.float16}),
             ((np.int8(0), 10, 5), {}), ((0, 1, 4), {"dtype": bfloat16}),
             ((-5, 5, 4), {"dtype": np.int16}), ((1, 0, 3), {"endpoint": False, "retstep": True})]


@pytest.mark.parametrize("args,kwargs", _LINSPACE, ids=[f"{a}-{k}"[:60] for a, k in _LINSPACE])
def test_linspace(args, kwargs):
    out = jnp.linspace(*args, **kwargs)
    check_avals_like_jax(out, jax_fn("linspace"), *args, **kwargs)
    ref_kwargs = dict(kwargs)
    dt = np.asarray(out[0] if kwargs.get("retstep") else out).dtype
    ref_kwargs["dtype"] = dt if dt.kind in "iu" else np.float64
    ref = np.linspace(*[a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args],
                      **ref_kwargs)
    if kwargs.get("retstep"):
        assert_close(out[0], ref[0], dtype=dt)
        assert_close(out[1], ref[1], dtype=dt)
    else:
        assert_close(out, ref, dtype=dt)


def test_logspace_geomspace():
    assert_close(jnp.logspace(0, 2, 5), np.logspace(0, 2, 5), dtype=np.float32)
    assert_close(jnp.logspace(0, 3, 4, base=2.0, endpoint=False),
                 np.logspace(0, 3, 4, base=2.0, endpoint=False), dtype=np.float32)
    assert_close(jnp.geomspace(1, 100, 5), np.geomspace(1, 100, 5), dtype=np.float32)
    assert_close(jnp.geomspace(-1, -100, 4), np.geomspace(-1, -100, 4), dtype=np.float32)
    check_avals_like_jax(jnp.logspace(0, 2, 5), jax_fn("logspace"), 0, 2, 5)
    check_avals_like_jax(jnp.geomspace(1, 100, 5), jax_fn("geomspace"), 1, 100, 5)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
@pytest.mark.parametrize("shape,dtype", [(3, None), ((2, 3), np.int8), ((), None),
                                         ((2, 0), np.bool_), ((1, 2), bfloat16),
                                         ([2, 2], np.complex64)])
def test_zeros_ones_empty(name, shape, dtype):
    out = getattr(jnp, name)(shape, dtype)
    check_avals_like_jax(out, jax_fn(name), shape, dtype)
    if name != "empty":
        ref = getattr(np, name)(shape, np.asarray(out).dtype)
        assert_close(out, ref)


@pytest.mark.parametrize("fill,dtype", [(1.5, None), (2, np.float16), (True, None), (7, None),
                                        (np.float16(3), None), (2.5, np.int32), (1j, None)])
def test_full(fill, dtype):
    out = jnp.full((2, 3), fill, dtype)
    check_avals_like_jax(out, jax_fn("full"), (2, 3), fill, dtype)
    assert_close(out, np.full((2, 3), fill).astype(np.asarray(out).dtype))
    row = np.array([1, 2, 3], np.int8)
    out = jnp.full((2, 3), row)
    check_avals_like_jax(out, jax_fn("full"), (2, 3), row)
    assert_close(out, np.full((2, 3), row))


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like"])
@pytest.mark.parametrize("arg,kwargs", [
    (np.arange(6, dtype=np.int8).reshape(2, 3), {}), (3.0, {}), (2, {}),
    (np.ones((2, 2), np.float32), {"dtype": np.int32}),
    (np.ones((2, 2), np.float32), {"shape": (5,)}), (np.ones(3, bfloat16), {})])
def test_like_functions(name, arg, kwargs):
    extra = (4,) if name == "full_like" else ()
    out = getattr(jnp, name)(arg, *extra, **kwargs)
    check_avals_like_jax(out, jax_fn(name), arg, *extra, **kwargs)
    if name != "empty_like":
        ref_fn = getattr(np, name)
        ref = ref_fn(np.asarray(arg), *extra, dtype=np.asarray(out).dtype,
                     shape=kwargs.get("shape"))
        assert_close(out, ref)


@pytest.mark.parametrize("args,kwargs", [((3,), {}), ((3, 4, 1), {}), ((3,), {"dtype": np.int32}),
                                         ((4, 3, -2), {}), ((0,), {}), ((2, 5, 7), {}),
                                         ((3,), {"dtype": bool})])
def test_eye_tri_identity(args, kwargs):
    out = jnp.eye(*args, **kwargs)
    check_avals_like_jax(out, jax_fn("eye"), *args, **kwargs)
    assert_close(out, np.eye(*args, **kwargs))
    out = jnp.tri(*args, **kwargs)
    check_avals_like_jax(out, jax_fn("tri"), *args, **kwargs)
    assert_close(out, np.tri(*args, **kwargs))
    out = jnp.identity(args[0], **kwargs)
    assert_close(out, np.identity(args[0], **kwargs))
    check_avals_like_jax(out, jax_fn("identity"), args[0], **kwargs)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    a = np.arange(3, dtype=np.int32)
    b = np.linspace(0, 1, 4).astype(np.float32)
    c = np.arange(2, dtype=np.int8)
    for arrays in [(a,), (a, b), (a, b, c)]:
        out = jnp.meshgrid(*arrays, indexing=indexing, sparse=sparse)
        ref = np.meshgrid(*arrays, indexing=indexing, sparse=sparse)
        assert len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_close(o, r)
        check_avals_like_jax(out, jax_fn("meshgrid"), *arrays, indexing=indexing,
                             sparse=sparse)
    with pytest.raises(ValueError, match="indexing"):
        jnp.meshgrid(a, b, indexing="xz")


@pytest.mark.parametrize("dims,kwargs", [((2, 3), {}), ((2, 3), {"sparse": True}),
                                         ((4,), {"dtype": np.int8}), ((2, 1, 3), {}),
                                         ((), {})])
def test_indices(dims, kwargs):
    out = jnp.indices(dims, **kwargs)
    ref = np.indices(dims, **kwargs)
    check_avals_like_jax(out, jax_fn("indices"), dims, **kwargs)
    if kwargs.get("sparse"):
        for o, r in zip(out, ref):
            assert_close(o, r)
    else:
        assert_close(out, ref)


@pytest.mark.parametrize("name", ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                  "uint32", "uint64", "bfloat16", "float16", "float32",
                                  "float64", "complex64", "complex128"])
def test_scalar_types_make_arrays(name):
    t = getattr(jnp, name)
    with warnings.catch_warnings():
        # 64-bit types are truncated without x64, with a warning (as in JAX)
        warnings.simplefilter("ignore", UserWarning)
        out = t(1)
        check_avals_like_jax(out, jax_fn(name), 1)
        assert out.shape == () and out.item() == 1
        assert np.dtype(out.dtype) == plax.dtypes.canonicalize_dtype(np.dtype(t))
        out = t([1, 2])
        assert out.shape == (2,)
        check_avals_like_jax(out, jax_fn(name), [1, 2])


def test_scalar_type_aliases_and_dtype_helpers():
    for alias in ("int_", "uint", "float_", "complex_", "single", "double", "csingle",
                  "cdouble", "half"):
        t = getattr(jnp, alias)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out = t(2)
        assert out.item() == 2
    assert jnp.dtype(jnp.float32) == np.float32
    assert jnp.dtype("bfloat16") == bfloat16
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.result_type(jnp.int8, 1.0) == np.float32
    assert jnp.promote_types(jnp.uint8, jnp.int8) == np.int16
    assert jnp.can_cast(np.int8, np.int32) and not jnp.can_cast(np.float32, np.int8)
    assert jnp.iscomplexobj(jnp.ones(2, jnp.complex64)) and jnp.isrealobj(jnp.ones(2))
    assert jnp.isscalar(3.0) and jnp.isscalar(jnp.float32(1)) and not jnp.isscalar(jnp.ones(2))
    assert jnp.finfo(jnp.float16).bits == 16 and jnp.iinfo(jnp.int8).max == 127
    assert jnp.float0 == plax.dtypes.float0


def test_from_dlpack_and_copy():
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = jnp.from_dlpack(host)
    assert_close(out, host)
    back = np.from_dlpack(out)
    assert_close(back, host)
    x = jnp.array(host)
    assert_close(jnp.copy(x), host)


def test_empty_list_is_float():
    out = jnp.array([])
    check_avals_like_jax(out, jax_fn("array"), [])
    assert out.shape == (0,)

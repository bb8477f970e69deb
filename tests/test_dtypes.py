"""dtype semantics: JAX's promotion lattice, weak types, canonicalisation under the x64 flag.

Every pair of operands (all supported dtypes as arrays, weakly typed arrays, and Python
scalars) is compared with JAX's results in both x64 modes: ``promote_types``,
``result_type``, and the dtype *and* weak type of ``x + y``, ``x / y`` and operators with a
scalar on either side. JAX's results are recorded in jax_promotion_table.json by
record_jax_promotion.py, so the comparison runs without JAX; where JAX is installed the
recording is also checked to be current.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import dtypes
from promotion_tables import load_recording, tables
from subprocess_util import last_json, run_python

ALL_DTYPES = [np.dtype(d) for d in dtypes.supported_dtypes]


@pytest.fixture(scope="module")
def plax_tables():
    return tables(plax)


@pytest.fixture(scope="module")
def jax_tables():
    return load_recording()["tables"]


@pytest.fixture(params=["x32", "x64"])
def x64(request):
    """Runs the test with x64 off and on, then restores the flag."""
    old = plax.config.read("jax_enable_x64")
    plax.config.update("jax_enable_x64", request.param == "x64")
    try:
        yield request.param == "x64"
    finally:
        plax.config.update("jax_enable_x64", old)


# ------------------------------------------------------------------ against JAX

@pytest.mark.parametrize("mode", ["x32", "x64"])
@pytest.mark.parametrize("table", ["promote_types", "result_type", "add", "true_divide",
                                   "scalar_ops", "canonicalize", "python_scalars"])
def test_promotion_table_matches_jax(plax_tables, jax_tables, table, mode):
    ours, theirs = plax_tables[mode][table], jax_tables[mode][table]
    assert sorted(ours) == sorted(theirs)
    mismatches = [(k, ours[k], theirs[k]) for k in sorted(ours) if ours[k] != theirs[k]]
    assert not mismatches, mismatches[:10]


def test_recording_is_current():
    jax = pytest.importorskip("jax")
    assert tables(jax) == load_recording()["tables"], (
        "JAX's promotion differs from the recording: re-run tests/record_jax_promotion.py")


# ------------------------------------------------------------------ without JAX

def test_lattice_examples():
    # Values from JAX's type promotion table (jax.readthedocs.io, "Type promotion semantics").
    assert dtypes.promote_types("uint8", "int8") == np.int16
    assert dtypes.promote_types("int32", "float16") == np.float16
    assert dtypes.promote_types("bfloat16", "float16") == np.float32
    assert dtypes.promote_types("uint64", "int64") == np.float64
    assert dtypes.promote_types("float32", "complex64") == np.complex64
    assert dtypes.promote_types(bool, "uint8") == np.uint8
    assert dtypes.result_type(np.int8(1), 1.0) == np.float32
    assert dtypes.result_type(pnp.ones(2, pnp.uint8), 1) == np.uint8
    assert dtypes.result_type(1, 1.0, return_weak_type_flag=True) == (np.float32, True)
    assert dtypes.result_type(pnp.int32, 1.0, return_weak_type_flag=True) == (np.float32, True)


def test_promotion_is_symmetric_and_idempotent(x64):
    for a, b in itertools.product(ALL_DTYPES, ALL_DTYPES):
        assert dtypes.promote_types(a, b) == dtypes.promote_types(b, a)
    for a in ALL_DTYPES:
        assert dtypes.promote_types(a, a) == a


def test_x32_lattice_creates_no_64_bit_type():
    with plax.config.override("jax_enable_x64", False):
        assert dtypes.promote_types("uint32", "int8") == np.int32
        assert dtypes.promote_types("uint32", "int32") == np.int32
    with plax.config.override("jax_enable_x64", True):
        assert dtypes.promote_types("uint32", "int8") == np.int64


def test_weak_scalars_do_not_widen():
    x = pnp.ones(3, pnp.uint8)
    assert (x + 1).dtype == np.uint8 and not (x + 1).weak_type
    assert (x + 300).dtype == np.uint8  # wraps, as in JAX
    np.testing.assert_array_equal(np.asarray(x + 300), np.full(3, 45, np.uint8))
    assert (pnp.ones(2, pnp.bfloat16) * 2.0).dtype == pnp.bfloat16
    assert (pnp.ones(2, pnp.float16) + 1j).dtype == np.complex64
    with pytest.raises(OverflowError, match="2199023255552.*int32"):
        pnp.ones(2, pnp.int32) + 2 ** 41


def test_bad_dtype_raises_type_error():
    with pytest.raises(TypeError, match="not a valid plax array type"):
        dtypes.canonicalize_dtype(np.dtype("U3"))
    with pytest.raises(TypeError, match="Cannot interpret 'nonsense' as a data type"):
        dtypes.canonicalize_dtype("nonsense")
    with pytest.raises(TypeError, match="dtype <U1 is not a valid plax array type"):
        pnp.asarray(np.array(["a"]))


@pytest.mark.parametrize("dt,expected32", [
    (np.int64, np.int32), (np.uint64, np.uint32), (np.float64, np.float32),
    (np.complex128, np.complex64), (np.int16, np.int16), (dtypes.bfloat16, dtypes.bfloat16),
])
def test_canonicalize_dtype(dt, expected32):
    with plax.config.override("jax_enable_x64", False):
        assert dtypes.canonicalize_dtype(dt) == expected32
    with plax.config.override("jax_enable_x64", True):
        assert dtypes.canonicalize_dtype(dt) == np.dtype(dt)


def test_default_types_follow_x64():
    with plax.config.override("jax_enable_x64", False):
        assert [pnp.asarray(v).dtype for v in (1, 1.0, 1j)] == [np.int32, np.float32,
                                                                   np.complex64]
        assert pnp.asarray(np.arange(3)).dtype == np.int32  # NumPy int64 input is truncated
    with plax.config.override("enable_x64", True):  # the flag works without the jax_ prefix
        assert [pnp.asarray(v).dtype for v in (1, 1.0, 1j)] == [np.int64, np.float64,
                                                                   np.complex128]
        assert pnp.asarray(np.arange(3)).dtype == np.int64


@pytest.mark.parametrize("make,where", [
    (lambda: pnp.zeros(2, dtype=pnp.float64), "zeros"),
    (lambda: pnp.ones(2).astype(np.int64), "astype"),
    (lambda: pnp.arange(3, dtype="complex128"), "arange"),
])
def test_truncated_dtype_warning(make, where):
    with plax.config.override("jax_enable_x64", False):
        with pytest.warns(UserWarning, match=rf"Explicitly requested dtype \w+ requested in "
                                             rf"{where} is not available, and will be truncated "
                                             r"to dtype \w+\. .*jax_enable_x64"):
            out = make()
    assert out.dtype.itemsize <= 8 and out.dtype in (np.float32, np.int32, np.complex64)


def test_no_truncation_warning_with_x64_or_python_types():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with plax.config.override("jax_enable_x64", True):
            assert pnp.zeros(2, dtype=pnp.float64).dtype == np.float64
        with plax.config.override("jax_enable_x64", False):
            assert pnp.zeros(2, dtype=float).dtype == np.float32
            assert pnp.zeros(2, dtype=int).dtype == np.int32


def test_unknown_config_flag():
    with pytest.raises(AttributeError, match="^Unrecognized config option: jax_not_a_flag$"):
        plax.config.update("jax_not_a_flag", True)  # JAX's message (tests/test_config.py)


@pytest.mark.parametrize("var", ["JAX_ENABLE_X64", "PLAX_ENABLE_X64"])
def test_x64_from_environment(var):
    code = """
        import json, plax, plax.numpy as jnp
        print(json.dumps([str(jnp.asarray(1.0).dtype), plax.config.x64_enabled]))
    """
    assert last_json(run_python(code, env={var: "1"})) == ["float64", True]
    assert last_json(run_python(code, env={var: "0"})) == ["float32", False]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
def test_every_dtype_has_array_and_scalar_type():
    for dt in ALL_DTYPES:
        scalar_type = getattr(pnp, dt.name if dt.name != "bool" else "bool_")
        x = scalar_type(1)
        assert isinstance(x, plax.Array) and x.dtype == dtypes.canonicalize_dtype(dt)
        assert not x.weak_type


_X64_ADVICE = ("is not available, and will be truncated to dtype {}. To enable more dtypes, set "
               "the jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell environment "
               "variable. See https://github.com/jax-ml/jax#current-gotchas for more.")


def _truncation_warnings(jax_mod):
    """(file name, message) of the truncation warning of each call, made from this file."""
    jnp, random = jax_mod.numpy, jax_mod.random
    key = random.key(0)
    calls = [lambda: random.uniform(key, (2,), dtype=jnp.float64),
             lambda: random.normal(key, (2,), dtype="float64"),
             lambda: random.randint(key, (2,), 0, 3, dtype=jnp.int64),
             lambda: jnp.zeros(3, jnp.float64),
             lambda: jax_mod.jit(lambda: jnp.zeros(3, jnp.float64))()]
    out = []
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        out.append([(w.filename, str(w.message)) for w in caught])
    return out


def test_truncation_warning_points_at_the_caller_worded_as_jax():
    with plax.config.override("jax_enable_x64", False):
        got = _truncation_warnings(plax)
    here = __file__
    assert got == [
        [(here, "Explicitly requested dtype float64 " + _X64_ADVICE.format("float32"))],
        [(here, "Explicitly requested dtype float64 " + _X64_ADVICE.format("float32"))],
        [(here, "Explicitly requested dtype int64 " + _X64_ADVICE.format("int32"))],
        [(here, "Explicitly requested dtype float64 requested in zeros "
                + _X64_ADVICE.format("float32"))],
        [(here, "Explicitly requested dtype float64 requested in zeros "
                + _X64_ADVICE.format("float32"))],
    ]


def test_truncation_warning_as_jax():
    jax = pytest.importorskip("jax")
    if jax.config.jax_enable_x64:
        pytest.skip("JAX runs with x64 on here: it truncates nothing")
    with plax.config.override("jax_enable_x64", False):
        assert _truncation_warnings(plax) == _truncation_warnings(jax)


# ---------------------------------------------------------------- extended dtypes, bit sizes

def test_typed_key_dtypes_are_prng_key_subtypes():
    import plax
    import plax.numpy as jnp
    from plax import dtypes as D
    key = plax.random.key(0).dtype
    assert jnp.issubdtype(key, D.prng_key) and jnp.issubdtype(key, D.extended)
    assert jnp.issubdtype(key, np.generic) and jnp.issubdtype(key, key)
    assert not jnp.issubdtype(key, np.number) and not jnp.issubdtype(key, jnp.float32)
    assert not jnp.issubdtype(key, "float32") and not jnp.issubdtype(jnp.float32, key)
    assert not jnp.issubdtype(plax.random.PRNGKey(0).dtype, D.prng_key)  # raw uint32 keys
    assert not jnp.issubdtype(jnp.float32, D.extended)
    assert jnp.issubdtype(D.prng_key, D.extended) and jnp.issubdtype(D.extended, np.generic)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)


@pytest.mark.parametrize("name,bits", [("int4", 4), ("uint4", 4), ("int2", 2), ("float4_e2m1fn", 4),
                                       ("float8_e4m3fn", 8), ("bool", 8), ("int8", 8),
                                       ("bfloat16", 16), ("float32", 32), ("complex128", 128)])
def test_itemsize_bits(name, bits):
    from plax import dtypes as D
    if name not in ("bool", "int8", "float32", "complex128", "bfloat16"):
        pytest.importorskip("ml_dtypes")
        import ml_dtypes
        if not hasattr(ml_dtypes, name):
            pytest.skip(f"this ml_dtypes has no {name}")
    assert D.itemsize_bits(name) == bits


def test_scalar_type_of_and_errors():
    import plax
    import plax.numpy as jnp
    from plax import dtypes as D
    cases = [(True, bool), (np.uint8(1), int), (1j, complex), (1.5, float), (3, int),
             (jnp.ones(2, jnp.bfloat16), float), (jnp.ones(2, jnp.int8), int),
             (jnp.zeros(2, jnp.complex64), complex), (np.zeros(2, bool), bool)]
    for value, expected in cases:
        assert D.scalar_type_of(value) is expected, value
    key = plax.random.key(0)
    with pytest.raises(TypeError, match="extended dtype"):
        D.scalar_type_of(key)
    with pytest.raises(ValueError, match="numeric dtype"):
        D.itemsize_bits(key.dtype)
    with pytest.raises(ValueError, match="numeric dtype"):
        D.itemsize_bits(None)

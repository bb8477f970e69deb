"""dtype semantics: JAX's promotion lattice, weak types, canonicalisation under the x64 flag.

Every pair of operands (all supported dtypes as arrays, weakly typed arrays, and Python
scalars) is compared with real JAX in both x64 modes: ``promote_types``, ``result_type``,
and the dtype *and* weak type of ``x + y`` and ``x / y``. JAX's side uses ``eval_shape``
(tracing only, no compilation), so the whole table costs well under a second.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import dtypes
from subprocess_util import last_json, run_python

ALL_DTYPES = [np.dtype(d) for d in dtypes.supported_dtypes]
PY_SCALARS = [True, 3, 2.5, 1 + 2j]


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    """Runs the test with x64 off and on, in plax and (when importable) in JAX, then restores."""
    old = plax.config.read("jax_enable_x64")
    plax.config.update("jax_enable_x64", request.param)
    jax = _maybe_jax()
    jax_old = jax.config.read("jax_enable_x64") if jax else None
    if jax:
        jax.config.update("jax_enable_x64", request.param)
    try:
        yield request.param
    finally:
        plax.config.update("jax_enable_x64", old)
        if jax:
            jax.config.update("jax_enable_x64", jax_old)


def _maybe_jax():
    try:
        import jax
    except ImportError:
        return None
    return jax


def _operands():
    """(label, spec) for every operand kind: strong arrays of each dtype, weak arrays, scalars."""
    out = [(f"{dt.name}[]", ("strong", dt)) for dt in ALL_DTYPES]
    out += [(f"weak {type(v).__name__}[]", ("weak", v)) for v in (3, 2.5, 1 + 2j)]
    out += [(f"py {type(v).__name__}", ("py", v)) for v in PY_SCALARS]
    return out


def _make(spec, np_module):
    kind, v = spec
    if kind == "strong":
        return np_module.asarray(np.ones(2, v))
    if kind == "weak":
        return np_module.asarray(v)  # an array made from a Python scalar is weakly typed
    return v


OPERANDS = _operands()
PAIRS = [(a, b) for a, b in itertools.product(OPERANDS, OPERANDS)
         if not (a[1][0] == "py" and b[1][0] == "py")]


# ------------------------------------------------------------------ against JAX

def test_promote_types_matches_jax(x64):
    jnp = pytest.importorskip("jax.numpy")
    mismatches = []
    for a, b in itertools.product(ALL_DTYPES, ALL_DTYPES):
        ours, theirs = dtypes.promote_types(a, b), jnp.promote_types(a, b)
        if ours != theirs:
            mismatches.append((a.name, b.name, ours, theirs))
    assert not mismatches


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")  # JAX warns for 64-bit dtypes
def test_result_type_matches_jax(x64):
    jnp = pytest.importorskip("jax.numpy")
    mismatches = []
    for (la, sa), (lb, sb) in itertools.product(OPERANDS, OPERANDS):
        ours = dtypes.result_type(_make(sa, pnp), _make(sb, pnp))
        theirs = jnp.result_type(_make(sa, jnp), _make(sb, jnp))
        if ours != theirs:
            mismatches.append((la, lb, ours, theirs))
    # dtypes (not values) as arguments, and a single argument
    for dt in ALL_DTYPES:
        if dtypes.result_type(dt) != jnp.result_type(dt):
            mismatches.append((dt.name, "-", dtypes.result_type(dt), jnp.result_type(dt)))
    assert not mismatches


@pytest.mark.parametrize("op", ["add", "true_divide"])
def test_binary_op_dtype_and_weak_type_match_jax(x64, op):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    mismatches = []
    for (la, sa), (lb, sb) in PAIRS:
        ours = getattr(pnp, op)(_make(sa, pnp), _make(sb, pnp))
        theirs = jax.eval_shape(getattr(jnp, op), _make(sa, jnp), _make(sb, jnp))
        got, want = (ours.dtype, ours.weak_type), (theirs.dtype, theirs.weak_type)
        if got != want:
            mismatches.append((la, lb, got, want))
    assert not mismatches, mismatches[:10]


def test_operator_results_match_jax_for_scalars_on_either_side(x64):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    mismatches = []
    for dt in ALL_DTYPES:
        for v in PY_SCALARS[1:]:
            for fn in (lambda x, s: x * s, lambda x, s: s * x, lambda x, s: x - s):
                ours = fn(pnp.asarray(np.ones(2, dt)), v)
                theirs = jax.eval_shape(lambda x: fn(x, v), jnp.asarray(np.ones(2, dt)))
                if (ours.dtype, ours.weak_type) != (theirs.dtype, theirs.weak_type):
                    mismatches.append((dt.name, v, ours.dtype, theirs.dtype))
    assert not mismatches


def test_canonicalize_dtype_matches_jax(x64):
    jax = pytest.importorskip("jax")
    for dt in ALL_DTYPES:
        assert dtypes.canonicalize_dtype(dt) == jax.dtypes.canonicalize_dtype(dt), dt
    for py_type in (int, float, complex, bool):
        assert pnp.asarray(py_type(1)).dtype == jax.numpy.asarray(py_type(1)).dtype


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
    with pytest.raises(AttributeError, match="'jax_not_a_flag'.*jax_enable_x64"):
        plax.config.update("jax_not_a_flag", True)


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

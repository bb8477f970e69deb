"""``==`` and ``!=`` of plax's own objects never raise for foreign objects (issue 8).

Generic code compares dtypes, devices, tree structures... with arbitrary objects:
``x in list_of_dtypes``, dict lookups that hit a hash collision, test tooling. Each class
below answers False (or NotImplemented, for arrays) for anything it does not know, whatever
that object's own ``__eq__`` or ``__bool__`` does, and the equalities JAX and NumPy accept
still hold. JAX is optional: only the comparisons with it skip without it.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax import tree_util
from plax.array import SingleDeviceSharding
from plax.core.shaped_array import ShapedArray, ShapeDtypeStruct
from plax.random.keys import KeyDType, threefry_prng_impl
from plax.transforms.jit import _Static

F32 = np.dtype("float32")

# np.dtype("a") warns (a deprecated alias) in plax's == as in NumPy's own np.dtype("f4") == "a".
pytestmark = pytest.mark.filterwarnings("ignore:Data type alias:DeprecationWarning")
# The string from the bug report: np.dtype() parses it as a record format, raising ValueError.
PYTEST_ID = "x.py::test_arange:\n  - a, b"


def _ours() -> dict[str, object]:
    """One instance of each class with a hand-written ``__eq__``."""
    return {
        "float32 type": jnp.float32,
        "bfloat16 type": jnp.bfloat16,
        "bool_ type": jnp.bool_,
        "device": plax.devices()[0],
        "sharding": SingleDeviceSharding(plax.devices()[0]),
        "ShapedArray": ShapedArray((2, 3), F32),
        "ShapeDtypeStruct": ShapeDtypeStruct((2,), F32),
        "PyTreeDef": tree_util.tree_structure((1, {"a": [2, None]})),
        "DictKey": tree_util.DictKey("a"),
        "SequenceKey": tree_util.SequenceKey(0),
        "GetAttrKey": tree_util.GetAttrKey("x"),
        "FlattenedIndexKey": tree_util.FlattenedIndexKey(1),
        "jit static key": _Static(3, hash(3)),
        "PRNGImpl": threefry_prng_impl,
        "KeyDType": KeyDType(threefry_prng_impl),
    }


OURS = _ours()
NAMES = sorted(OURS)


# ------------------------------------------------------------------ hostile foreign objects

class Hostile(Exception):
    """Raised by the foreign objects below; plax must never let one escape its __eq__."""


class _Raises:
    def __bool__(self):
        raise Hostile("__bool__")


class EqRaises:
    def __eq__(self, other):
        raise Hostile("__eq__")

    def __ne__(self, other):
        raise Hostile("__ne__")

    __hash__ = object.__hash__


class EqReturnsBadBool:
    def __eq__(self, other):
        return _Raises()

    __ne__ = __eq__
    __hash__ = object.__hash__


class Collides(EqRaises):
    """Hashes like a given object, to reach ``__eq__`` in a dict lookup."""

    def __init__(self, h):
        self.h = h

    def __hash__(self):
        return self.h


class _RaisingDtypeMeta(type):
    dtype = property(lambda cls: 1 / 0)  # np.dtype(cls) reads cls.dtype


class HasRaisingDtype(metaclass=_RaisingDtypeMeta):
    pass


class HostileStr(str):
    def __eq__(self, other):
        raise Hostile("str __eq__")

    __hash__ = str.__hash__


def _hostile() -> list:
    return [EqRaises(), EqReturnsBadBool(), np.arange(3.0), np.array(["float32", "x"]),
            HasRaisingDtype, HostileStr("float32"), HostileStr(PYTEST_ID), _Raises()]


def _foreign() -> st.SearchStrategy:
    types_then_values = st.from_type(type).flatmap(st.from_type)
    return st.one_of(st.text(), st.binary(), st.integers(), st.floats(), st.none(),
                     st.complex_numbers(), st.from_type(object), types_then_values,
                     st.sampled_from(_hostile()), st.sampled_from(_DTYPE_STRINGS))


# Strings a dtype comparison may meet: names, aliases, record and subarray formats, junk.
_DTYPE_STRINGS = ["float32", "f4", "<f4", ">f4", "float", "float64", "int32", "i4", "bool",
                  "bfloat16", "a", "a4", "i,i", "(2)i", "(2,)f4", "f4,", "O", "V4", "U3", "S",
                  "M8", "m8[s]", "Complex64", "int0", "", " ", "abc", PYTEST_ID, "[('a', 'f4')]",
                  "(99999999999999999999)i", "{'names': ['a']}"]


def _check_never_raises(a, other):
    """``a == other`` and ``a != other`` are opposite bools; the method itself never raises."""
    assert type(a).__eq__(a, other) in (False, True, NotImplemented)
    eq, ne = a == other, a != other
    assert type(eq) is bool and type(ne) is bool
    assert eq is not ne


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(other=_foreign())
def test_eq_with_arbitrary_objects_never_raises(name, other):
    a = OURS[name]
    _check_never_raises(a, other)
    assert type(other in list(OURS.values())) is bool  # list.__contains__ asks ours first
    if not isinstance(other, (str, bytes, type, np.dtype)):
        # Only dtype specifiers can equal a scalar type; for every other class the
        # objects generated here are all foreign.
        assert (a == other) is False


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("other", _hostile(), ids=lambda o: type(o).__name__)
def test_eq_with_hostile_objects_is_false(name, other):
    """Foreign ``__eq__``/``__bool__`` that raise are never reached: plax answers False."""
    a = OURS[name]
    eq = a == other
    if isinstance(a, type) and isinstance(other, str):
        # A str subclass may still name a dtype (np.dtype() decides, and may give up).
        assert type(eq) is bool
    else:
        assert eq is False
    assert (a != other) is not eq
    assert (other in [a]) is eq  # list.__contains__ asks a first
    d = {a: 1}
    assert d.get(Collides(hash(a))) is None  # same hash: the dict asks a.__eq__


@pytest.mark.parametrize("name", NAMES)
def test_membership_and_dict_lookup(name):
    a = OURS[name]
    ours = list(OURS.values())
    assert a in ours
    foreign = ["float3", PYTEST_ID, None, object(), 1.5, b"", (), np.float16]
    for f in foreign:
        assert f not in [a]
    table = {**{f: "foreign" for f in foreign if f.__hash__ is not None}, a: name}
    assert table[a] == name
    assert table.get(Collides(hash(a))) is None
    assert table.get(PYTEST_ID) == "foreign"


# ------------------------------------------------------------------ what still compares equal

@pytest.mark.parametrize("spec", [np.float32, F32, jnp.float32, jnp.dtype("float32")])
def test_scalar_type_equals_its_dtype_specifiers(spec):
    assert jnp.float32 == spec and spec == jnp.float32
    assert not (jnp.float32 != spec)
    assert jnp.float64 != spec and jnp.int32 != spec


def test_scalar_type_positive_cases():
    import ml_dtypes
    assert jnp.dtype("float32") == jnp.float32 == np.dtype(jnp.float32)
    assert jnp.bfloat16 == ml_dtypes.bfloat16 == jnp.dtype("bfloat16")
    assert jnp.int64 == np.int64 and jnp.bool_ == np.bool_ and jnp.bool_ != "bool"
    assert jnp.float32 in [np.float64, np.float32] and np.float32 in [jnp.float32]
    assert jnp.float32 in {np.float32, np.int8} and {np.float32: 1}[jnp.float32] == 1
    assert {jnp.float32: 1}[np.float32] == 1 and hash(jnp.float32) == hash(np.float32)
    assert jnp.float32 != jnp.float64 and jnp.float32 != "float64"


@pytest.mark.parametrize("s", _DTYPE_STRINGS)
def test_scalar_type_equals_no_string(s):
    """As in JAX and NumPy (``np.float32 == "float32"`` is False), a scalar type is a type,
    not a dtype: it equals no string, though ``jnp.dtype(s)`` does."""
    assert (jnp.float32 == s) is False and (jnp.float32 != s) is True
    assert (jnp.dtype(jnp.float32) == s) is (F32 == s)


def test_scalar_type_eq_with_warnings_as_errors():
    """Under -W error np.dtype("a") raises DeprecationWarning; == still answers."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (jnp.float32 == "a") is False and (jnp.float32 != "a4") is True
        assert (jnp.float32 == PYTEST_ID) is False


def test_scalar_type_is_not_equal_to_values():
    # np.dtype(x) reads x.dtype, which made jnp.float32 == jnp.ones(3) True before.
    for value in [jnp.ones(3), np.ones(3, np.float32), np.float32(1), 1.0, [np.float32]]:
        assert (jnp.float32 == value) is False


def test_other_positive_cases():
    for name, a in _ours().items():  # fresh instances: equality by value, not identity
        b = OURS[name]
        assert a == b and not (a != b), name
        assert hash(a) == hash(b), name
    assert tree_util.tree_structure([1, 2]) != tree_util.tree_structure((1, 2))
    assert tree_util.DictKey(np.int64(1)) == tree_util.DictKey(np.int64(1))
    assert type(tree_util.DictKey(np.int64(1)) == tree_util.DictKey(np.int64(1))) is bool
    assert tree_util.DictKey("a") != tree_util.GetAttrKey("a")
    assert KeyDType(threefry_prng_impl) == "key<fry>"
    assert ShapedArray((2,), F32) != ShapedArray((2,), F32, weak_type=True)


# ------------------------------------------------------------------ arrays

_ARRAY_FOREIGN = {"str": "abc", "dtype string": "float32", "bug string": PYTEST_ID,
                  "object": object(), "None": None, "bytes": b"x", "list": [1.0, 2.0, 3.0],
                  "dict": {}, "EqRaises": EqRaises(), "slice": slice(1)}


@pytest.mark.parametrize("key", list(_ARRAY_FOREIGN))
def test_array_eq_foreign_object(key):
    """Arrays defer (NotImplemented) to objects they do not know: Python then compares
    identities, so ``==`` is False and ``!=`` True. (JAX raises TypeError for list, tuple,
    dict and set; plax answers False for them too.)"""
    other = _ARRAY_FOREIGN[key]
    for x in (jnp.ones(3), jnp.float32(1.0)):
        assert type(x).__eq__(x, other) is NotImplemented
        assert type(x).__ne__(x, other) is NotImplemented
        if key == "EqRaises":  # Python asks the other object next: its error is its own
            with pytest.raises(Hostile):
                x == other  # noqa: B015
            continue
        assert (x == other) is False and (x != other) is True
        assert (other == x) is False
    key_array = plax.random.key(0)
    assert type(key_array).__eq__(key_array, other) is NotImplemented


def test_array_eq_foreign_matches_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as real_jnp
    for key in ["str", "dtype string", "bug string", "object", "None", "bytes", "slice"]:
        other = _ARRAY_FOREIGN[key]
        ours, theirs = jnp.ones(3), real_jnp.ones(3)
        assert type(ours).__eq__(ours, other) is type(theirs).__eq__(theirs, other)
        assert (ours == other) is (theirs == other) and (ours != other) is (theirs != other)
    del jax


def test_scalar_type_comparisons_match_jax():
    """JAX's scalar types equal no string, and the same dtype specifiers as plax's."""
    pytest.importorskip("jax")
    import jax.numpy as real_jnp
    for s in _DTYPE_STRINGS:
        theirs = real_jnp.float32 == s  # must not raise either
        assert type(theirs) is bool
        assert (jnp.float32 == s) is theirs, s
    for spec in [np.float32, F32, real_jnp.float32, np.float64, float]:
        assert (jnp.float32 == spec) is (real_jnp.float32 == spec), spec
    assert (jnp.float32 == real_jnp.float32) and (real_jnp.float32 == jnp.float32)


# ------------------------------------------------------------------ jit static arguments

class _ArrayEq:
    """Hashable, but == returns an array: a user error for a static argument."""

    def __hash__(self):
        return 1

    def __eq__(self, other):
        return np.array([True, True])


def test_jit_static_argument_with_bad_eq():
    calls = []

    def f(x, s):
        calls.append(1)
        return x

    g = plax.jit(f, static_argnames="s")
    s = _ArrayEq()
    g(1.0, s=s)
    g(1.0, s=s)  # the same object again: a cache hit, no comparison needed
    assert len(calls) == 1
    with pytest.raises(ValueError, match="Static arguments must compare with =="):
        g(1.0, s=_ArrayEq())

"""dtypes: canonicalisation under the x64 flag, weak types, and JAX's promotion lattice.

JAX does not promote like NumPy. Types form a lattice and the result of mixing
two types is their least upper bound; Python scalars (and arrays created from
them) are *weakly typed*: they take the other operand's type instead of
widening it. ``int32 array + 1.0`` is float32, ``uint8 array + 1`` is uint8.
With ``jax_enable_x64`` off (the default) 64-bit types are canonicalised to
their 32-bit counterparts.
"""
from __future__ import annotations

import builtins
import functools
import sys
import warnings
from typing import Any

import ml_dtypes
import numpy as np

from plax.config import config

# The trivial tangent type of integer and boolean values (JAX's float0): a
# structured dtype with no bytes, so a float0 array of any shape costs nothing.
float0 = np.dtype([("float0", np.void, 0)])

bfloat16 = np.dtype(ml_dtypes.bfloat16)
bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

_extended_floats = frozenset({bfloat16})

#: the Python scalar types plax takes as (weakly typed) arrays
PY_SCALAR_TYPES = (bool, int, float, complex)
#: the host values an operation, a ``jit`` call or a callback takes as arrays: NumPy arrays
#: and scalars, Python scalars
HOST_VALUE_TYPES = (np.ndarray, np.generic, *PY_SCALAR_TYPES)
#: the dtype classes of the host dtypes that are numbers: NumPy's of kinds ``"biufc"`` and
#: bfloat16 (ml_dtypes', of kind ``"V"`` as structured and void dtypes are). Tested as
#: ``type(x.dtype) in NUMERIC_DTYPE_TYPES``: exact (ml_dtypes' other formats, which plax
#: does not take, are out, ``float8_e5m2`` of kind ``"f"`` among them), and cheaper than
#: comparing kinds (a dtype's class does not depend on its byte order)
NUMERIC_DTYPE_TYPES = frozenset(
    [type(np.dtype(c)) for c in np.typecodes["All"] if np.dtype(c).kind in "biufc"]
    + [type(bfloat16)])

supported_dtypes = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                    bfloat16, float16, float32, float64, complex64, complex128)

_to_32bit = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}
# canonicalize_dtype's answers for numpy dtypes, by x64 setting (a product's
# preferred_element_type is canonicalised on every call)
_canonical_of = {False: {d: _to_32bit.get(d, d) for d in supported_dtypes},
                 True: {d: d for d in supported_dtypes}}


def _x64() -> bool:
    return config._values["enable_x64"]


def default_int_dtype() -> np.dtype:
    """The dtype of a Python int: int64 with x64 enabled, else int32."""
    return int64 if _x64() else int32


def default_float_dtype() -> np.dtype:
    """The dtype of a Python float: float64 with x64 enabled, else float32."""
    return float64 if _x64() else float32


def default_complex_dtype() -> np.dtype:
    """The dtype of a Python complex: complex128 with x64 enabled, else complex64."""
    return complex128 if _x64() else complex64


def default_uint_dtype() -> np.dtype:
    return uint64 if _x64() else uint32


@functools.lru_cache(maxsize=None)
def _canonicalize(dtype: np.dtype, x64: bool) -> np.dtype:
    if dtype == float0:
        return dtype
    if dtype not in supported_dtypes:
        raise TypeError(f"dtype {dtype!r} is not a valid plax array type. "
                        f"Supported dtypes: {', '.join(str(d) for d in supported_dtypes)}.")
    return dtype if x64 else _to_32bit.get(dtype, dtype)


def canonicalize_dtype(dtype: Any, allow_extended_dtype: bool = False) -> np.dtype:
    """Returns the dtype plax uses for ``dtype`` under the current x64 setting.

    Args:
      dtype: anything ``np.dtype`` accepts, a plax scalar type, or a Python type.
      allow_extended_dtype: whether a typed PRNG key dtype (``key<fry>``, JAX's extended
        dtypes) is returned as it is; otherwise it is refused with a ValueError, as JAX
        refuses it.

    Raises:
      ValueError: ``dtype`` is a key dtype and ``allow_extended_dtype`` is False.
      TypeError: ``dtype`` is not a dtype.

    Returns:
      A ``numpy.dtype``; 64-bit types become 32-bit ones when x64 is disabled.

    Example:
      >>> canonicalize_dtype("float64")
      dtype('float32')
    """
    x64 = _x64()
    if isinstance(dtype, np.dtype):
        known = _canonical_of[x64].get(dtype)
        if known is not None:
            return known
    try:
        np_dtype = to_numpy_dtype(dtype)
    except TypeError:  # (only then is it worth asking whether it is a key dtype)
        from plax.random.keys import KeyDType
        if not isinstance(dtype, KeyDType):
            raise
        if allow_extended_dtype:
            return dtype
        # (JAX's exception here; plax's other dtype checks give a key dtype a TypeError)
        raise ValueError(f"canonicalize_dtype got the extended dtype {dtype} with "
                         "allow_extended_dtype=False (pass allow_extended_dtype=True to "
                         "accept a key dtype)") from None
    return _canonicalize(np_dtype, x64)


def to_numpy_dtype(dtype: Any) -> np.dtype:
    """Converts ``dtype`` to a ``numpy.dtype`` without canonicalising it.

    Python's ``int``/``float``/``complex``/``bool`` map to the default plax types.
    """
    if dtype is builtins.int:
        return default_int_dtype()
    if dtype is builtins.float:
        return default_float_dtype()
    if dtype is builtins.complex:
        return default_complex_dtype()
    if dtype is builtins.bool:
        return bool_
    if dtype is None:
        raise TypeError("dtype must not be None here")
    inner = getattr(dtype, "dtype", None)
    if isinstance(inner, np.dtype):
        return inner
    try:
        return np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"Cannot interpret {dtype!r} as a data type") from err


def fills_keys(fill_value: Any, dtype: Any) -> bool:
    """Whether filling with ``fill_value`` as ``dtype`` is a matter for typed keys
    (:mod:`plax.random.key_fill`, which also refuses keys as numbers): ``dtype`` is a key
    dtype or ``fill_value`` a key array. Cheap where no key was ever made (no key module).

    Example:
      >>> fills_keys(0, plax.random.key(0).dtype), fills_keys(0.0, np.float32)
      (True, False)
    """
    keys = sys.modules.get("plax.random.keys")
    return keys is not None and (isinstance(dtype, keys.KeyDType) or
                                 isinstance(fill_value, keys.PRNGKeyArray))


def check_user_dtype(dtype: Any, fun_name: str | None) -> np.dtype:
    """Canonicalises a dtype a user asked for, warning when x64 truncates it.

    The warning, worded as JAX's, names ``fun_name`` (None: no name, as JAX's samplers in
    ``jax.random`` warn) and points at the user's line: the first frame outside plax."""
    requested = to_numpy_dtype(dtype)
    result = canonicalize_dtype(requested)
    # Identity, not ==: plax's scalar types compare equal to the dtypes they name.
    python_type = any(dtype is t for t in (builtins.int, builtins.float, builtins.complex))
    if result != requested and not python_type:
        from plax.plugins import _external_stacklevel  # the first frame outside plax
        where = f" requested in {fun_name}" if fun_name else ""
        warnings.warn(
            f"Explicitly requested dtype {requested}{where} is not available, and will be "
            f"truncated to dtype {result}. To enable more dtypes, set the jax_enable_x64 "
            "configuration option or the JAX_ENABLE_X64 shell environment variable. "
            "See https://github.com/jax-ml/jax#current-gotchas for more.",
            UserWarning, stacklevel=_external_stacklevel())
    return result


# ---------------------------------------------------------------- categories

class extended(np.generic):
    """The abstract scalar type of extended dtypes, which NumPy does not have (typed PRNG key
    dtypes): ``jnp.issubdtype(x.dtype, plax.dtypes.extended)``.

    Example:
      >>> jnp.issubdtype(jax.random.key(0).dtype, jax.dtypes.extended)
      True
    """


class prng_key(extended):
    """The abstract scalar type of typed PRNG key dtypes: ``jnp.issubdtype(x.dtype,
    plax.dtypes.prng_key)`` tells a typed key array from a raw ``uint32`` one.

    Example:
      >>> jnp.issubdtype(jax.random.key(0).dtype, jax.dtypes.prng_key)
      True
      >>> jnp.issubdtype(jax.random.PRNGKey(0).dtype, jax.dtypes.prng_key)
      False
    """


def _extended_class(x: Any) -> type | None:
    """The abstract scalar type of ``x`` when it is an extended dtype or one of the abstract
    extended types (its ``type``), else None."""
    if isinstance(x, type):
        return x if issubclass(x, extended) else None
    if isinstance(x, (np.dtype, str)):
        return None
    t = getattr(x, "type", None)
    return t if isinstance(t, type) and issubclass(t, extended) else None


def itemsize_bits(dtype: Any) -> int:
    """The number of bits one element of ``dtype`` takes (4 for ``int4``, 8 for ``bool``).

    Args:
      dtype: a NumPy dtype, scalar type or name (``ml_dtypes``' formats included).

    Returns:
      The element size in bits.

    Raises:
      ValueError: ``dtype`` is None or an extended dtype (a typed key).

    Example:
      >>> jax.dtypes.itemsize_bits(jnp.bfloat16), jax.dtypes.itemsize_bits("int4")
      (16, 4)
    """
    if dtype is None or _extended_class(dtype) is not None:
        raise ValueError(f"itemsize_bits needs a numeric dtype, got {dtype!r}")
    dt = to_numpy_dtype(dtype)
    # ml_dtypes' sub-byte formats (int4, float4_e2m1fn, ...) store a byte per element but
    # are narrower: their finfo/iinfo give the width
    name = dt.name
    if dt.itemsize == 1 and name not in ("bool", "int8", "uint8"):
        info = ml_dtypes.iinfo(dt) if dt.kind in "iu" or "int" in name else ml_dtypes.finfo(dt)
        return int(info.bits)
    return dt.itemsize * 8


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (``bool``, ``int``, ``float`` or ``complex``) matching the dtype
    of ``x``.

    Args:
      x: an array, a NumPy or Python scalar.

    Returns:
      One of ``bool``, ``int``, ``float``, ``complex``.

    Raises:
      TypeError: ``x`` has no numeric dtype (a typed key array, a string).

    Example:
      >>> jax.dtypes.scalar_type_of(jnp.ones(2, jnp.bfloat16)), jax.dtypes.scalar_type_of(3)
      (<class 'float'>, <class 'int'>)
    """
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt = dtype(x)
    if _extended_class(dt) is not None:
        raise TypeError(f"scalar_type_of: {x!r} has the extended dtype {dt}, which has no Python "
                        "scalar type")
    dt = to_numpy_dtype(dt)
    if dt == np.bool_:
        return bool
    if dt.kind in "iu":
        return int
    if is_float(dt):
        return float
    if dt.kind == "c":
        return complex
    raise TypeError(f"scalar_type_of: invalid scalar value {x!r} (dtype {dt})")


def issubdtype(a: Any, b: Any) -> bool:
    """Like ``np.issubdtype``, but knows that bfloat16 is a floating type and float0 is not,
    and knows the extended dtypes (typed keys: subtypes of :class:`prng_key`)."""
    a_ext, b_ext = _extended_class(a), _extended_class(b)
    if a_ext is not None or b_ext is not None:
        if a_ext is None:
            return False
        if isinstance(b, type):
            return issubclass(a_ext, b)
        return not isinstance(a, type) and a == b
    a_dt = to_numpy_dtype(a) if not (isinstance(a, type) and a in _abstract) else a
    if isinstance(a_dt, np.dtype) and a_dt in _extended_floats:
        if isinstance(b, type) and b in _abstract:
            return b in (np.floating, np.inexact, np.number, np.generic)
        return to_numpy_dtype(b) == a_dt
    if isinstance(a_dt, np.dtype) and a_dt == float0:
        return isinstance(b, np.dtype) and b == float0
    if not (isinstance(b, type) and b in _abstract):
        b = to_numpy_dtype(b)
        if b in _extended_floats:
            return False
    return bool(np.issubdtype(a_dt, b))


_abstract = {np.generic, np.number, np.inexact, np.floating, np.complexfloating,
             np.integer, np.signedinteger, np.unsignedinteger, np.bool_, np.character,
             np.flexible}


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in _extended_floats


def is_complex(dtype: np.dtype) -> bool:
    return dtype.kind == "c"


def is_inexact(dtype: np.dtype) -> bool:
    return dtype.kind in "fc" or dtype in _extended_floats


def is_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_bool(dtype: np.dtype) -> bool:
    return dtype.kind == "b"


def finfo(dtype: Any) -> Any:
    """Machine limits of a floating type, bfloat16 included."""
    return ml_dtypes.finfo(to_numpy_dtype(dtype))


def iinfo(dtype: Any) -> Any:
    """Machine limits of an integer type."""
    return np.iinfo(to_numpy_dtype(dtype))


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The real counterpart of a complex dtype (float32 for complex64); others unchanged."""
    return {complex64: float32, complex128: float64}.get(dtype, dtype)


_to_inexact = {bool_: float32, int8: float32, int16: float32, int32: float32, uint8: float32,
               uint16: float32, uint32: float32, int64: float64, uint64: float64}


def to_inexact_dtype(dtype: np.dtype) -> np.dtype:
    """The floating type that functions like ``sin`` or ``/`` compute integer inputs in.

    Inexact types are unchanged; up to 32-bit integers (and bool) give float32 even with
    x64 enabled, 64-bit integers give float64 (canonicalised to float32 without x64).

    Example:
      >>> to_inexact_dtype(np.dtype("int16"))
      dtype('float32')
    """
    return canonicalize_dtype(_to_inexact.get(dtype, dtype))


def complex_dtype_for(dtype: np.dtype) -> np.dtype:
    """The complex type that holds values of ``dtype``."""
    return complex128 if dtype in (float64, complex128) else complex64


# ---------------------------------------------------------------- promotion

# Nodes of the lattice: concrete dtypes plus the three weak categories.
_I, _F, _C = "int*", "float*", "complex*"

_lattice_up: dict[Any, tuple] = {
    bool_: (_I,),
    _I: (uint8, int8, _F),
    uint8: (int16, uint16), uint16: (int32, uint32), uint32: (int64, uint64), uint64: (_F,),
    int8: (int16,), int16: (int32,), int32: (int64,), int64: (_F,),
    _F: (bfloat16, float16, _C),
    bfloat16: (float32,), float16: (float32,), float32: (float64, complex64), float64: (complex128,),
    _C: (complex64,), complex64: (complex128,), complex128: (),
}
# Without x64, no promotion may *create* a 64-bit type from narrower inputs. The only such
# edge is uint32 -> int64 (uint32 with a signed type), which then goes to int32 instead.
_lattice_up_x32 = {**_lattice_up, uint32: (int32, uint64)}


def _upper_bounds(lattice: dict, node) -> frozenset:
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(lattice[n])
    return frozenset(seen)


_ub = {True: {n: _upper_bounds(_lattice_up, n) for n in _lattice_up},
       False: {n: _upper_bounds(_lattice_up_x32, n) for n in _lattice_up_x32}}


@functools.lru_cache(maxsize=None)
def _join(a, b, x64: bool):
    ub = _ub[x64]
    common = ub[a] & ub[b]
    # The least upper bound is the common bound that all other common bounds are above.
    for c in common:
        if common <= ub[c]:
            return c
    raise TypePromotionError(f"Input dtypes {a} and {b} have no available implicit dtype "
                             "promotion path.")


class TypePromotionError(ValueError):
    """Raised when two dtypes cannot be promoted implicitly."""


def _node(dtype: np.dtype, weak: bool):
    if weak:
        if dtype.kind in "iu":
            return _I
        if dtype.kind == "f" or dtype in _extended_floats:
            return _F
        if dtype.kind == "c":
            return _C
    return dtype


def _node_dtype(node, x64: bool) -> tuple[np.dtype, bool]:
    if node == _I:
        return (int64 if x64 else int32), True
    if node == _F:
        return (float64 if x64 else float32), True
    if node == _C:
        return (complex128 if x64 else complex64), True
    return node, False


def promote_types(a: Any, b: Any) -> np.dtype:
    """Returns the type that both ``a`` and ``b`` are promoted to (JAX's table, not NumPy's).

    Example:
      >>> promote_types("uint8", "int8")
      dtype('int16')
    """
    a, b = to_numpy_dtype(a), to_numpy_dtype(b)
    node = _join(a, b, _x64())
    if node == _I:
        return int64
    if node == _F:
        return float64
    if node == _C:
        return complex128
    return node


def dtype_and_weak_type(x: Any) -> tuple[np.dtype, bool]:
    """The (canonical dtype, weak_type) of a value: an array, a tracer, a Python or NumPy scalar."""
    t = type(x)
    if t is builtins.bool:
        return bool_, False
    if t is builtins.int:
        return default_int_dtype(), True
    if t is builtins.float:
        return default_float_dtype(), True
    if t is builtins.complex:
        return default_complex_dtype(), True
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    if isinstance(x, (np.ndarray, np.generic)):
        return canonicalize_dtype(x.dtype), False
    if isinstance(x, (np.dtype, type, str)):
        return canonicalize_dtype(x), False
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return canonicalize_dtype(dt), False
    raise TypeError(f"Cannot determine the dtype of {x!r} (of type {t.__name__}); "
                    "expected an array, a scalar or a dtype.")


def dtype(x: Any) -> np.dtype:
    """The canonical dtype of an array, scalar or dtype-like ``x``."""
    return dtype_and_weak_type(x)[0]


def is_weakly_typed(x: Any) -> bool:
    """Whether ``x`` is a Python scalar or a weakly typed array."""
    return dtype_and_weak_type(x)[1]


def result_type(*args: Any, return_weak_type_flag: bool = False):
    """The dtype values of ``args`` promote to under JAX's rules (canonicalised).

    Args:
      *args: arrays, tracers, scalars or dtypes.
      return_weak_type_flag: also return whether the result is weakly typed.

    Returns:
      A ``numpy.dtype``, or ``(dtype, weak_type)`` when asked for the flag.

    Example:
      >>> result_type(np.int8(1), 1.0)
      dtype('float32')
    """
    if not args:
        raise ValueError("at least one array or dtype is required")
    pairs = tuple([dtype_and_weak_type(a) for a in args])
    if _strict:
        _check_strict(pairs)
    dt, weak = _result_type_of(pairs, _x64())
    return (dt, weak) if return_weak_type_flag else dt


@functools.lru_cache(maxsize=4096)
def _result_type_of(pairs: tuple, x64: bool) -> tuple[np.dtype, bool]:
    node = None
    for dt, weak in pairs:
        n = _node(dt, weak)
        node = n if node is None else _join(node, n, x64)
    dt, weak = _node_dtype(node, x64)
    return _canonicalize(dt, x64), weak


def result_type_of_avals(pairs: tuple) -> tuple[np.dtype, bool]:
    """Cached promotion of ``((dtype, weak_type), ...)`` pairs: the fast path of every binary op."""
    if _strict:
        _check_strict(pairs)
    return _result_type_of(pairs, _x64())


# jax_numpy_dtype_promotion="strict": set by the config listener below, read on every promotion
_strict = False
_WEAK_NAMES = {_I: "<class 'int'>", _F: "<class 'float'>", _C: "<class 'complex'>"}
_WEAK_FITS = {_I: "iufcV", _F: "fcV", _C: "c"}  # the kinds a Python scalar may join strictly


def _check_strict(pairs: tuple) -> None:
    """JAX's strict promotion: operands of one dtype, beside Python scalars of a lower or equal
    kind; anything else raises :class:`TypePromotionError`."""
    if config._values["numpy_dtype_promotion"] != "strict":
        return
    strong = {dt for dt, weak in pairs if not weak or _node(dt, weak) == dt}
    weak = {_node(dt, True) for dt, w in pairs if w and _node(dt, True) != dt}
    if len(strong) <= 1:
        target = next(iter(strong), None)
        if target is None or all(target.kind in _WEAK_FITS[w] for w in weak):
            return
    names = sorted({str(np.dtype(dt).name) for dt in strong} | {_WEAK_NAMES[w] for w in weak})
    raise TypePromotionError(
        f"Input dtypes {tuple(names)} have no available implicit dtype promotion path when "
        "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired output "
        "type, or set jax_numpy_dtype_promotion=standard.")


def _on_config_change(name: str, value: Any) -> None:
    global _strict
    # while a thread has a context manager active the mode may differ between threads:
    # _check_strict then reads the running thread's
    _strict = config.has_thread_contexts() or \
        config._values["numpy_dtype_promotion"] == "strict"


config.on_change(_on_config_change)
_on_config_change("numpy_dtype_promotion", config.read("numpy_dtype_promotion"))

"""How pytree structures are encoded, and the table of registered node types.

A leaf is encoded as ``None``; an internal node as the 4-tuple ``(kind, type, data,
children)`` with ``children`` a tuple of encoded nodes. Plain tuples make equality and
hashing of whole structures run in C, which matters because transformations use treedefs
as cache keys. Imports only the standard library.
"""
from __future__ import annotations

_LEAF_KIND = 0
_TUPLE = 1
_LIST = 2
_NAMEDTUPLE = 3
_DICT = 4
_NONE = 5
_CUSTOM = 6
_UNSEEN = -1

_NoneType = type(None)


class _Entry:
    """How one registered node type is taken apart and put back together."""

    __slots__ = ("flatten", "unflatten", "flatten_with_keys")

    def __init__(self, flatten, unflatten, flatten_with_keys):
        self.flatten = flatten
        self.unflatten = unflatten
        self.flatten_with_keys = flatten_with_keys


# Custom (user-registered) node types. The built-in kinds are handled inline.
_registry: dict[type, _Entry] = {}

# type -> kind, filled lazily for every type met while flattening. Leaf types
# are cached too (kind 0), so the common "is this a leaf?" test is a single
# dict lookup.
_BUILTIN_KINDS = {tuple: _TUPLE, list: _LIST, dict: _DICT, _NoneType: _NONE}
_kinds: dict[type, int] = dict(_BUILTIN_KINDS)
# Programs that create classes on the fly would otherwise grow the cache
# without bound.
_KIND_CACHE_LIMIT = 4096
_kind_get = _kinds.get


def _classify(t: type) -> int:
    if t in _registry:
        kind = _CUSTOM
    elif issubclass(t, tuple) and hasattr(t, "_fields"):
        kind = _NAMEDTUPLE
    else:
        kind = _LEAF_KIND
    if len(_kinds) >= _KIND_CACHE_LIMIT:
        _kinds.clear()
        _kinds.update(_BUILTIN_KINDS)
    _kinds[t] = kind
    return kind


class _Aux:
    """Holds custom node metadata so structures can compare and hash safely.

    Metadata may be unhashable (a list) or compare elementwise (an array).
    """

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not _Aux:
            return False  # not NotImplemented: the other side's __eq__ may raise
        a, b = self.value, other.value
        if a is b:
            return True
        try:
            return bool(a == b)
        except Exception as exc:
            raise ValueError(
                "Comparing the metadata (aux data) of two pytree nodes raised "
                f"{type(exc).__name__}: {exc}. Node metadata must be hashable "
                "and compare with plain equality; arrays are not valid "
                "metadata."
            ) from exc

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        try:
            return hash(self.value)
        except TypeError:
            # Equal values must hash equally; the type is a safe, coarse key.
            return hash(type(self.value))

    def __repr__(self):
        return f"_Aux({self.value!r})"

    def __reduce__(self):
        return (_Aux, (self.value,))


def _sorted_keys(d):
    try:
        return tuple(sorted(d))
    except Exception as exc:
        raise ValueError(
            "Comparator raised exception while sorting pytree dictionary keys.\n"  # JAX's line
            "Could not sort the keys of a dict while flattening it as a pytree "
            f"node ({type(exc).__name__}: {exc}); dict keys must be mutually "
            f"orderable. Keys: {list(d)!r}"
        ) from None



def _register(nodetype, flatten, unflatten, flatten_with_keys):
    if not isinstance(nodetype, type):
        raise TypeError(f"pytree node types must be classes, got {nodetype!r}")
    if nodetype in _registry or nodetype in _BUILTIN_KINDS:
        raise ValueError(
            f"Duplicate pytree node registration: {nodetype!r} is already a "
            "pytree node type."
        )
    _registry[nodetype] = _Entry(flatten, unflatten, flatten_with_keys)
    # The type may have been cached as a leaf (or as a namedtuple) before.
    _kinds[nodetype] = _CUSTOM

"""Pytrees: nested containers of leaves, and the utilities that walk them.

A *pytree* is a value built from container *nodes* (tuples, lists, dicts,
``None``, namedtuples, ``OrderedDict``, ``defaultdict`` and any type registered
with :func:`register_pytree_node` and friends) whose non-container parts are
*leaves*. Every plax transformation flattens its arguments into a list of
leaves plus a :class:`PyTreeDef` describing the structure, works on the
leaves, and rebuilds the structure afterwards.

The semantics follow ``jax.tree_util``. This module is a leaf of the plax core:
it imports only the standard library, and nothing else from plax.
"""

from __future__ import annotations

import collections
import functools

# ``typing`` costs a few milliseconds to import and every plax import pays for
# this module, so the names below exist only for static type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Hashable, Iterable
    from typing import Any, TypeVar

    T = TypeVar("T")
    Typ = TypeVar("Typ", bound=type)
    KeyEntry = Any
    KeyPath = tuple[Any, ...]
else:
    # Runtime stand-ins so that ``plax.tree_util.KeyPath`` etc. exist.
    KeyEntry = object
    KeyPath = tuple

__all__ = [
    "PyTreeDef",
    "KeyEntry",
    "KeyPath",
    "SequenceKey",
    "DictKey",
    "GetAttrKey",
    "FlattenedIndexKey",
    "Partial",
    "all_leaves",
    "build_tree",
    "flatten_one_level",
    "is_tree_node",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]


# ---------------------------------------------------------------------------
# Internal encoding of a structure.
#
# A leaf is encoded as ``None``; an internal node as the 4-tuple
# ``(kind, type, data, children)`` with ``children`` a tuple of encoded nodes.
# Plain tuples make equality and hashing of whole structures run in C, which
# matters because transformations use treedefs as cache keys.
# ---------------------------------------------------------------------------

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
            return NotImplemented
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
            "Could not sort the keys of a dict while flattening it as a pytree "
            f"node ({type(exc).__name__}: {exc}); dict keys must be mutually "
            f"orderable. Keys: {list(d)!r}"
        ) from None


# ---------------------------------------------------------------------------
# Flattening.
# ---------------------------------------------------------------------------


_NONE_NODE = (_NONE, _NoneType, None, ())

# The walkers below bind their globals as default arguments (local lookups are
# cheaper) and handle leaf and None children inline rather than by recursing:
# leaves vastly outnumber nodes, and a Python call per leaf would dominate.


def _flatten(x, app, get=_kind_get, registry=_registry, none_node=_NONE_NODE):
    """Flattens ``x`` without is_leaf, appending leaves; returns its encoding."""
    t = type(x)
    k = get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _TUPLE or k == _LIST or k == _NAMEDTUPLE:
        children = x
        data = None
    elif k == _DICT:
        data = _sorted_keys(x)
        children = [x[key] for key in data]
    elif k == _LEAF_KIND:
        app(x)
        return None
    elif k == _NONE:
        return none_node
    else:
        children, aux = registry[t].flatten(x)
        data = _Aux(aux)
    kids = []
    kapp = kids.append
    for c in children:
        ck = get(type(c), _UNSEEN)
        if ck == _LEAF_KIND:
            app(c)
            kapp(None)
        elif ck == _NONE:
            kapp(none_node)
        else:
            kapp(_flatten(c, app))
    return (k, t, data, tuple(kids))


def _flatten_is_leaf(x, app, is_leaf, get=_kind_get, registry=_registry,
                     none_node=_NONE_NODE):
    """Like _flatten, for a value that ``is_leaf`` already rejected."""
    t = type(x)
    k = get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _TUPLE or k == _LIST or k == _NAMEDTUPLE:
        children = x
        data = None
    elif k == _DICT:
        data = _sorted_keys(x)
        children = [x[key] for key in data]
    elif k == _LEAF_KIND:
        app(x)
        return None
    elif k == _NONE:
        return none_node
    else:
        children, aux = registry[t].flatten(x)
        data = _Aux(aux)
    kids = []
    kapp = kids.append
    for c in children:
        if is_leaf(c) or get(type(c), _UNSEEN) == _LEAF_KIND:
            app(c)
            kapp(None)
        else:
            kapp(_flatten_is_leaf(c, app, is_leaf))
    return (k, t, data, tuple(kids))


def _leaves(x, app, get=_kind_get, registry=_registry):
    """Collects the leaves of ``x`` without building its encoding."""
    t = type(x)
    k = get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _TUPLE or k == _LIST or k == _NAMEDTUPLE:
        children = x
    elif k == _DICT:
        children = [x[key] for key in _sorted_keys(x)]
    elif k == _LEAF_KIND:
        app(x)
        return
    elif k == _NONE:
        return
    else:
        children = registry[t].flatten(x)[0]
    for c in children:
        ck = get(type(c), _UNSEEN)
        if ck == _LEAF_KIND:
            app(c)
        elif ck != _NONE:
            _leaves(c, app)


def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], PyTreeDef]:
    """Flattens a pytree into a list of leaves and a structure.

    Args:
      tree: the pytree to flatten.
      is_leaf: optional predicate called on every subtree (the root included)
        before it is looked at; where it returns True the subtree is taken as
        a leaf as a whole.

    Returns:
      A pair ``(leaves, treedef)``: the leaves in left-to-right order (dict
      entries in sorted key order), and the :class:`PyTreeDef` that
      :func:`tree_unflatten` uses to rebuild the tree.

    Example:
      >>> leaves, treedef = tree_flatten([1, {'b': 2, 'a': (3, None)}])
      >>> leaves
      [1, 3, 2]
      >>> treedef
      PyTreeDef([*, {'a': (*, None), 'b': *}])
    """
    if is_leaf is None:
        t = type(tree)
        if t is tuple or t is list:
            # Hot path of every jitted call: a flat tuple/list of arrays.
            for x in tree:
                if _kind_get(type(x), _UNSEEN) != _LEAF_KIND:
                    break
            else:
                n = len(tree)
                return list(tree), _flat_treedef(t, n)
        leaves: list[Any] = []
        node = _flatten(tree, leaves.append)
    else:
        leaves = []
        if is_leaf(tree):
            return [tree], _LEAF_TREEDEF
        node = _flatten_is_leaf(tree, leaves.append, is_leaf)
    if node is None:
        return leaves, _LEAF_TREEDEF
    return leaves, _make_treedef(node, len(leaves))


def tree_leaves(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> list[Any]:
    """Returns the leaves of a pytree, in flattening order.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves (see
        :func:`tree_flatten`).

    Returns:
      The list of leaves; ``None`` contributes none.

    Example:
      >>> tree_leaves([1, None, {'x': 2, 'y': (3,)}])
      [1, 2, 3]
    """
    if is_leaf is not None:
        return tree_flatten(tree, is_leaf)[0]
    leaves: list[Any] = []
    _leaves(tree, leaves.append)
    return leaves


def tree_structure(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> PyTreeDef:
    """Returns the :class:`PyTreeDef` describing a pytree's structure.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves (see
        :func:`tree_flatten`).

    Returns:
      The structure of ``tree``.

    Example:
      >>> tree_structure({'a': [1, 2], 'b': None})
      PyTreeDef({'a': [*, *], 'b': None})
    """
    return tree_flatten(tree, is_leaf)[1]


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuilds a pytree from its structure and leaves.

    Args:
      treedef: the structure, as returned by :func:`tree_flatten`.
      leaves: exactly ``treedef.num_leaves`` leaves, in flattening order.

    Returns:
      The pytree with structure ``treedef`` and the given leaves.

    Raises:
      ValueError: if the number of leaves is wrong.

    Example:
      >>> treedef = tree_structure((1, [2, 3]))
      >>> tree_unflatten(treedef, ['a', 'b', 'c'])
      ('a', ['b', 'c'])
    """
    return treedef.unflatten(leaves)


# ---------------------------------------------------------------------------
# Unflattening.
# ---------------------------------------------------------------------------


def _build(node, vals):
    """Makes one node of kind ``node[0]`` from its already-built children."""
    k = node[0]
    if k == _TUPLE:
        return tuple(vals)
    if k == _LIST:
        return list(vals)
    if k == _DICT:
        return dict(zip(node[2], vals))
    if k == _NONE:
        return None
    if k == _NAMEDTUPLE:
        return node[1](*vals)
    return _registry[node[1]].unflatten(node[2].value, tuple(vals))


def _unflatten(node, nxt, registry=_registry):
    k, t, data, kids = node
    vals = []
    vapp = vals.append
    for c in kids:
        if c is None:
            vapp(nxt())
        elif c[0] == _NONE:
            vapp(None)
        else:
            vapp(_unflatten(c, nxt))
    if k == _TUPLE:
        return tuple(vals)
    if k == _LIST:
        return vals
    if k == _DICT:
        return dict(zip(data, vals))
    if k == _NONE:
        return None
    if k == _NAMEDTUPLE:
        return t(*vals)
    return registry[t].unflatten(data.value, tuple(vals))


# A treedef that is unflattened repeatedly (a jitted function's output
# structure, say) gets a generated function that builds the whole tree in one
# expression, e.g. ``lambda l: {c0: (l[0], [l[1], None]), c1: l[2]}``; this is
# several times faster than walking the encoding. Generation costs tens of
# microseconds, so it happens only after a few uses of the same treedef.
_COMPILE_AFTER = 8
# Python's parser rejects deeply nested expressions, and compiling a huge one
# costs more than it saves; such trees keep the walk.
_COMPILE_MAX_DEPTH = 40
_COMPILE_MAX_NODES = 2000


class _TooDeep(Exception):
    pass


def _gen_expr(node, consts, next_leaf, depth):
    if node is None:
        i = next_leaf[0]
        next_leaf[0] = i + 1
        return f"l[{i}]"
    if depth > _COMPILE_MAX_DEPTH:
        raise _TooDeep
    k, t, data, kids = node

    def const(value):
        consts.append(value)
        return f"c{len(consts) - 1}"

    parts = [_gen_expr(c, consts, next_leaf, depth + 1) for c in kids]
    if k == _TUPLE:
        return "(" + "".join(p + ", " for p in parts) + ")"
    if k == _LIST:
        return "[" + ", ".join(parts) + "]"
    if k == _DICT:
        return "{" + ", ".join(f"{const(key)}: {p}" for key, p in zip(data, parts)) + "}"
    if k == _NONE:
        return "None"
    if k == _NAMEDTUPLE:
        return f"{const(t)}(" + ", ".join(parts) + ")"
    fn = const(_registry[t].unflatten)
    aux = const(data.value)
    return f"{fn}({aux}, (" + "".join(p + ", " for p in parts) + "))"


def _compile_unflatten(node):
    """Returns a function ``leaves -> tree`` for the encoding ``node``."""
    if node is None:
        return _first

    def walk(leaves):
        return _unflatten(node, iter(leaves).__next__)

    if _num_nodes(node) > _COMPILE_MAX_NODES:
        return walk
    consts: list[Any] = []
    try:
        expr = _gen_expr(node, consts, [0], 0)
    except _TooDeep:
        return walk
    namespace = {f"c{i}": v for i, v in enumerate(consts)}
    namespace["__builtins__"] = {}
    # Only generated names and integer indices appear in the source; every
    # user value (dict keys, types, aux data) is passed in ``namespace``.
    return eval(f"lambda l: {expr}", namespace)  # noqa: S307


def _first(leaves):
    return leaves[0]


# ---------------------------------------------------------------------------
# PyTreeDef.
# ---------------------------------------------------------------------------


class _StructureMismatch(Exception):
    """Internal: raised by _flatten_up_to; carries the child-index path."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail
        self.rev_path = []  # child indices, innermost first


def _flatten_up_to(node, x, app):
    k, t, data, kids = node
    if k == _TUPLE or k == _LIST:
        if type(x) is not t:
            raise _StructureMismatch(f"Expected {t.__name__}, got {x!r}.")
        if len(x) != len(kids):
            what = "Tuple" if k == _TUPLE else "List"
            raise _StructureMismatch(
                f"{what} arity mismatch: {len(x)} != {len(kids)}; "
                f"{t.__name__}: {x!r}."
            )
        children = x
    elif k == _DICT:
        if type(x) is not dict:
            raise _StructureMismatch(f"Expected dict, got {x!r}.")
        keys = _sorted_keys(x)
        if keys != data:
            raise _StructureMismatch(
                f"Dict key mismatch; expected keys: {list(data)!r}; "
                f"present keys: {list(keys)!r}."
            )
        children = [x[key] for key in data]
    elif k == _NONE:
        if x is not None:
            raise _StructureMismatch(f"Expected None, got {x!r}.")
        return
    elif k == _NAMEDTUPLE:
        xt = type(x)
        if xt is not t:
            if not (isinstance(x, tuple) and hasattr(x, "_fields")):
                raise _StructureMismatch(f"Expected named tuple, got {x!r}.")
            raise _StructureMismatch(
                f"Named tuple type mismatch: expected type: {t!r}, "
                f"tuple: {x!r}."
            )
        children = x
    else:
        if type(x) is not t:
            raise _StructureMismatch(
                f"Custom node type mismatch: expected type: {t!r}, "
                f"value: {x!r}."
            )
        children, aux = _registry[t].flatten(x)
        children = list(children)
        if not (_Aux(aux) == data):
            raise _StructureMismatch(
                f"Mismatch custom node data: {data.value!r} != {aux!r}; "
                f"value: {x!r}."
            )
        if len(children) != len(kids):
            raise _StructureMismatch(
                f"Custom type arity mismatch: {len(children)} != {len(kids)}; "
                f"value: {x!r}."
            )
    i = 0
    for kid, c in zip(kids, children):
        if kid is None:
            app(c)
        else:
            try:
                _flatten_up_to(kid, c, app)
            except _StructureMismatch as e:
                e.rev_path.append(i)
                raise
        i += 1


def _child_key(node, x, i):
    """The key entry of child ``i`` of value ``x``, whose node is ``node``."""
    k, t, data, _ = node
    if k == _TUPLE or k == _LIST:
        return SequenceKey(i)
    if k == _NAMEDTUPLE:
        return GetAttrKey(t._fields[i])
    if k == _DICT:
        return DictKey(data[i])
    entry = _registry[t]
    if entry.flatten_with_keys is not None:
        try:
            return list(entry.flatten_with_keys(x)[0])[i][0]
        except Exception:
            pass
    return FlattenedIndexKey(i)


def _child_values(node, x):
    k, t, data, _ = node
    if k == _DICT:
        return [x[key] for key in data]
    if k == _CUSTOM:
        return list(_registry[t].flatten(x)[0])
    return list(x)


def _mismatch_path(node, x, indices):
    """Turns a child-index path into a key path, walking the value ``x``."""
    path = []
    for i in indices:
        path.append(_child_key(node, x, i))
        x = _child_values(node, x)[i]
        node = node[3][i]
    return tuple(path)


def _describe_structure(x) -> str:
    try:
        return repr(tree_structure(x))
    except Exception as exc:  # a user flatten function may itself fail
        return f"<could not be flattened: {type(exc).__name__}: {exc}>"


def _mismatch_report(treedef, x, err) -> str:
    indices = err.rev_path[::-1]
    try:
        where = keystr(_mismatch_path(treedef._node, x, indices))
    except Exception:
        where = "".join(f"[<child {i}>]" for i in indices)
    return (
        f"{err.detail}\n"
        f"  at key path: {where or '(root)'}\n"
        f"  expected structure (as a prefix): {treedef!r}\n"
        f"  actual structure:                 {_describe_structure(x)}"
    )


def _num_nodes(node) -> int:
    if node is None:
        return 1
    n = 1
    for c in node[3]:
        n += 1 if c is None else _num_nodes(c)
    return n


def _num_leaves(node) -> int:
    if node is None:
        return 1
    n = 0
    for c in node[3]:
        n += 1 if c is None else _num_leaves(c)
    return n


def _node_repr(node) -> str:
    if node is None:
        return "*"
    k, t, data, kids = node
    if k == _NONE:
        return "None"
    parts = [_node_repr(c) for c in kids]
    if k == _TUPLE:
        return "(" + parts[0] + ",)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if k == _LIST:
        return "[" + ", ".join(parts) + "]"
    if k == _DICT:
        return "{" + ", ".join(f"{key!r}: {p}" for key, p in zip(data, parts)) + "}"
    label = "namedtuple" if k == _NAMEDTUPLE else t.__name__
    shown = t.__name__ if k == _NAMEDTUPLE else str(data.value)
    return f"CustomNode({label}[{shown}], [{', '.join(parts)}])"


def _compose(outer, inner):
    if outer is None:
        return inner
    k, t, data, kids = outer
    return (k, t, data, tuple(_compose(c, inner) for c in kids))


def _from_iterable(node, xs):
    if node is None:
        return xs
    vals = list(xs)
    kids = node[3]
    if len(vals) != len(kids):
        raise ValueError(
            f"build_tree: a node of {_node_repr(node)} has {len(kids)} "
            f"children but the iterable given for it has {len(vals)} items."
        )
    return _build(node, [_from_iterable(c, v) for c, v in zip(kids, vals)])


_object_new = object.__new__
_object_setattr = object.__setattr__


class PyTreeDef:
    """The structure of a pytree: every node and where its leaves go.

    Instances are immutable and hashable; two trees have equal treedefs when
    they have the same node types, node metadata (dict keys, custom aux data)
    and nesting. Get one from :func:`tree_flatten` or :func:`tree_structure`.

    Example:
      >>> treedef = tree_structure([1, {'k1': 2, 'k2': (3, 4)}, 5])
      >>> treedef
      PyTreeDef([*, {'k1': *, 'k2': (*, *)}, *])
      >>> treedef.num_leaves, treedef.num_nodes
      (5, 8)
    """

    # The state lives in private slots behind read-only properties; there is
    # no __setattr__ guard because it would slow down creating a treedef,
    # which every flatten does.

    __slots__ = ("_node", "_num_leaves", "_hash", "_fast")

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "PyTreeDef cannot be constructed directly; use tree_structure() "
            "or tree_flatten()."
        )

    @property
    def num_leaves(self) -> int:
        """Number of leaves in the structure."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """Number of nodes (leaves, ``None`` and containers) in the structure."""
        return _num_nodes(self._node)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Builds a pytree of this structure from ``leaves``.

        Args:
          leaves: exactly ``num_leaves`` leaves, in flattening order.

        Returns:
          The rebuilt pytree.

        Raises:
          ValueError: if there are too few or too many leaves.

        Example:
          >>> tree_structure({'a': 0, 'b': (0, 0)}).unflatten([1, 2, 3])
          {'a': 1, 'b': (2, 3)}
        """
        if type(leaves) is not list and type(leaves) is not tuple:
            leaves = list(leaves)
        n = self._num_leaves
        if len(leaves) != n:
            more = "many" if len(leaves) > n else "few"
            raise ValueError(
                f"Too {more} leaves for {self!r}; expected {n}, "
                f"got {len(leaves)}."
            )
        fast = self._fast
        if type(fast) is int:
            if fast < _COMPILE_AFTER:
                self._fast = fast + 1
                node = self._node
                if node is None:
                    return leaves[0]
                return _unflatten(node, iter(leaves).__next__)
            fast = self._fast = _compile_unflatten(self._node)
        return fast(leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flattens ``tree`` only as deep as this structure goes.

        Where this structure has a leaf, the whole corresponding subtree of
        ``tree`` is returned as one item; everywhere else the node types and
        metadata must match exactly.

        Args:
          tree: a pytree that has this structure as a prefix.

        Returns:
          A list of ``num_leaves`` subtrees of ``tree``.

        Raises:
          ValueError: if ``tree`` does not match; the message gives the first
            mismatch, its key path, and both structures.

        Example:
          >>> tree_structure([0, 0]).flatten_up_to([(1, 2), {'a': 3}])
          [(1, 2), {'a': 3}]
        """
        node = self._node
        if node is None:
            return [tree]
        out: list[Any] = []
        try:
            _flatten_up_to(node, tree, out.append)
        except _StructureMismatch as err:
            raise ValueError(_mismatch_report(self, tree, err)) from None
        return out

    def children(self) -> list[PyTreeDef]:
        """Returns the structures of the root's immediate children.

        Example:
          >>> tree_structure((1, [2, 3])).children()
          [PyTreeDef(*), PyTreeDef([*, *])]
        """
        node = self._node
        if node is None:
            return []
        return [_make_treedef(c, _num_leaves(c)) for c in node[3]]

    def node_data(self) -> tuple[type, Any] | None:
        """Returns ``(node_type, metadata)`` for the root, or None for a leaf.

        The metadata is ``None`` for tuples, lists, namedtuples and ``None``,
        the sorted key list for dicts, and the aux data for custom nodes.

        Example:
          >>> tree_structure({'b': 1, 'a': 2}).node_data()
          (<class 'dict'>, ['a', 'b'])
        """
        node = self._node
        if node is None:
            return None
        k, t, data, _ = node
        if k == _DICT:
            return (t, list(data))
        if k == _CUSTOM:
            return (t, data.value)
        return (t, None)

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """Returns the structure with ``inner`` put at each leaf of this one.

        Example:
          >>> tree_structure((0, 0)).compose(tree_structure([0]))
          PyTreeDef(([*], [*]))
        """
        return _make_treedef(
            _compose(self._node, inner._node),
            self._num_leaves * inner._num_leaves,
        )

    def from_iterable_tree(self, xs: Any) -> Any:
        """Same as :func:`build_tree` with this structure."""
        return _from_iterable(self._node, xs)

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not PyTreeDef:
            return NotImplemented
        return self._num_leaves == other._num_leaves and self._node == other._node

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            h = self._hash = hash(self._node)
            return h

    def __repr__(self):
        return f"PyTreeDef({_node_repr(self._node)})"

    __str__ = __repr__

    def __reduce__(self):
        return (_make_treedef, (self._node, self._num_leaves))


def _make_treedef(node, num_leaves, fast=0, new=_object_new) -> PyTreeDef:
    td = new(PyTreeDef)
    td._node = node
    td._num_leaves = num_leaves
    # ``_fast`` counts unflatten calls until it is replaced by a function
    # ``leaves -> tree`` (see _compile_unflatten); the cached flat-sequence
    # treedefs start out with ``tuple``/``list``, which are such functions.
    td._fast = fast
    return td


_LEAF_TREEDEF = _make_treedef(None, 1, _first)
_FLAT_CACHE_SIZE = 32
_flat_tuple_defs = [
    _make_treedef((_TUPLE, tuple, None, (None,) * n), n, tuple)
    for n in range(_FLAT_CACHE_SIZE)
]
_flat_list_defs = [
    _make_treedef((_LIST, list, None, (None,) * n), n, list)
    for n in range(_FLAT_CACHE_SIZE)
]


def _flat_treedef(t, n):
    if n < _FLAT_CACHE_SIZE:
        return (_flat_tuple_defs if t is tuple else _flat_list_defs)[n]
    kind = _TUPLE if t is tuple else _LIST
    return _make_treedef((kind, t, None, (None,) * n), n, t)


# ---------------------------------------------------------------------------
# Treedef helpers.
# ---------------------------------------------------------------------------


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """Makes the structure of a tuple whose children have the given structures.

    Args:
      treedefs: the structures of the tuple's elements.

    Returns:
      A :class:`PyTreeDef` for a tuple of those structures.

    Example:
      >>> treedef_tuple([tree_structure(1), tree_structure([1, 2])])
      PyTreeDef((*, [*, *]))
    """
    treedefs = list(treedefs)
    node = (_TUPLE, tuple, None, tuple(td._node for td in treedefs))
    return _make_treedef(node, sum(td._num_leaves for td in treedefs))


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """Returns the structures of a structure's immediate children.

    Args:
      treedef: a structure.

    Returns:
      One :class:`PyTreeDef` per child of the root (none for a leaf).

    Example:
      >>> treedef_children(tree_structure([(1, 2), 3, {'a': 4}]))
      [PyTreeDef((*, *)), PyTreeDef(*), PyTreeDef({'a': *})]
    """
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Tells whether a structure has a single node.

    That is true of a leaf, and also of ``None`` and of empty containers.

    Args:
      treedef: a structure.

    Returns:
      ``treedef.num_nodes == 1``.

    Example:
      >>> treedef_is_leaf(tree_structure(1)), treedef_is_leaf(tree_structure([1]))
      (True, False)
    """
    return treedef.num_nodes == 1


def build_tree(treedef: PyTreeDef, xs: Any) -> Any:
    """Builds a pytree of structure ``treedef`` from nested iterables.

    Each internal node of ``treedef`` takes its children, in flattening order,
    from one iterable of ``xs``; each leaf position takes the value found there
    as is.

    Args:
      treedef: the structure to build.
      xs: nested iterables shaped like ``treedef``.

    Returns:
      The pytree.

    Raises:
      ValueError: if an iterable has the wrong number of items.

    Example:
      >>> build_tree(tree_structure({'b': [0, 0], 'a': 0}), [7, [8, 9]])
      {'a': 7, 'b': [8, 9]}
    """
    return treedef.from_iterable_tree(xs)


def all_leaves(
    iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None
) -> bool:
    """Tells whether every element of ``iterable`` is a leaf.

    Args:
      iterable: values to test.
      is_leaf: optional predicate as in :func:`tree_flatten`; when given, the
        list of values is flattened with it and must come back unchanged.

    Returns:
      True if no element is a pytree node.

    Example:
      >>> all_leaves([1, 'a', 2.0]), all_leaves([1, (2,)]), all_leaves([None])
      (True, False, False)
    """
    items = list(iterable)
    if is_leaf is None:
        for x in items:
            t = type(x)
            k = _kind_get(t, _UNSEEN)
            if k == _UNSEEN:
                k = _classify(t)
            if k != _LEAF_KIND:
                return False
        return True
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    """Tells whether a type is a pytree node type (built-in, namedtuple or registered).

    Args:
      typ: a type.

    Returns:
      True if values of exactly this type are flattened into children.

    Example:
      >>> is_tree_node(tuple), is_tree_node(int)
      (True, False)
    """
    k = _kind_get(typ, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(typ)
    return k != _LEAF_KIND


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Any]:
    """Splits a pytree node into its immediate children and its metadata.

    Args:
      tree: a pytree node (not a leaf).

    Returns:
      ``(children, metadata)``; metadata as in :meth:`PyTreeDef.node_data`
      except that dict keys come as a tuple.

    Raises:
      ValueError: if ``tree`` is a leaf.

    Example:
      >>> flatten_one_level({'a': [1, 2], 'b': {'c': 3}})
      ([[1, 2], {'c': 3}], ('a', 'b'))
    """
    t = type(tree)
    k = _kind_get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _TUPLE or k == _LIST or k == _NAMEDTUPLE:
        return list(tree), None
    if k == _DICT:
        keys = _sorted_keys(tree)
        return [tree[key] for key in keys], keys
    if k == _NONE:
        return [], None
    if k == _CUSTOM:
        children, aux = _registry[t].flatten(tree)
        return list(children), aux
    raise ValueError(f"can't tree-flatten type: {t!r} (it is a pytree leaf)")


# ---------------------------------------------------------------------------
# Mapping, reducing, transposing.
# ---------------------------------------------------------------------------


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _flatten_rest(fname, treedef, rest):
    """flatten_up_to for each extra tree, with an error naming the culprit."""
    out = []
    for i, r in enumerate(rest):
        try:
            out.append(treedef.flatten_up_to(r))
        except ValueError as exc:
            raise ValueError(
                f"{fname}: the {_ordinal(i + 2)} tree does not have the "
                f"structure of the 1st tree (it must match it, or extend it "
                f"below the 1st tree's leaves).\n{exc}"
            ) from None
    return out


def tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Applies ``f`` leafwise over one or more pytrees.

    Args:
      f: function of ``1 + len(rest)`` arguments.
      tree: the pytree whose structure the result has.
      *rest: more pytrees, each having ``tree``'s structure or extending it
        (where ``tree`` has a leaf they may have any subtree, which ``f``
        receives whole).
      is_leaf: optional predicate marking subtrees of ``tree`` to treat as
        leaves (see :func:`tree_flatten`).

    Returns:
      A pytree of ``tree``'s structure holding ``f(leaf, *matching)`` at each
      leaf.

    Raises:
      ValueError: if a tree in ``rest`` does not match ``tree``'s structure;
        the message names the mismatch and both structures.

    Example:
      >>> tree_map(lambda x, y: x + y, {'a': 1, 'b': (2, 3)}, {'a': 10, 'b': (20, 30)})
      {'a': 11, 'b': (22, 33)}
    """
    if not rest and is_leaf is None:
        return _map1(f, tree)
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = _flatten_rest("tree_map", treedef, rest)
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def _map1(f, x, get=_kind_get, registry=_registry):
    """tree_map of one tree in a single walk, skipping the treedef.

    Calls ``f`` on the leaves in the same order, and rebuilds each node the
    same way, as flattening and unflattening would.
    """
    t = type(x)
    k = get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _LEAF_KIND:
        return f(x)
    if k == _NONE:
        return None
    if k == _DICT:
        keys = _sorted_keys(x)
        children = [x[key] for key in keys]
    elif k == _CUSTOM:
        entry = registry[t]
        children, aux = entry.flatten(x)
    else:
        children = x
    vals = [
        f(c) if get(type(c), _UNSEEN) == _LEAF_KIND else _map1(f, c)
        for c in children
    ]
    if k == _TUPLE:
        return tuple(vals)
    if k == _LIST:
        return vals
    if k == _DICT:
        return dict(zip(keys, vals))
    if k == _NAMEDTUPLE:
        return t(*vals)
    return entry.unflatten(aux, tuple(vals))


_MISSING = object()


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Folds ``function`` over the leaves of a pytree, left to right.

    Args:
      function: binary function ``(accumulated, leaf) -> accumulated``.
      tree: the pytree.
      initializer: optional starting value; without it the first leaf is.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      The reduced value.

    Raises:
      TypeError: if the tree has no leaves and no initializer is given.

    Example:
      >>> import operator
      >>> tree_reduce(operator.add, [1, (2, 3), {'a': 4}])
      10
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def _halving_reduce(seq, op):
    if len(seq) == 1:
        return seq[0]
    mid = len(seq) // 2
    return op(_halving_reduce(seq[:mid], op), _halving_reduce(seq[mid:], op))


def tree_reduce_associative(
    operation: Callable[[Any, Any], Any],
    tree: Any,
    *,
    identity: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves with an associative operation, as a balanced tree.

    The combination order differs from :func:`tree_reduce`, which keeps the
    depth of the computation logarithmic in the number of leaves.

    Args:
      operation: associative binary function.
      tree: the pytree.
      identity: value returned for a tree without leaves.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      The reduced value.

    Raises:
      TypeError: if the tree has no leaves and no identity is given.

    Example:
      >>> import operator
      >>> tree_reduce_associative(operator.add, [1, 2, 3, 4])
      10
    """
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _MISSING:
            raise TypeError(
                "tree_reduce_associative: the tree has no leaves; pass "
                "identity= to reduce an empty tree."
            )
        return identity
    return _halving_reduce(leaves, operation)


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Tells whether every leaf of a pytree is truthy.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      ``all(tree_leaves(tree))``; True for a tree without leaves.

    Example:
      >>> tree_all([True, {'a': 1}]), tree_all([True, (0,)])
      (True, False)
    """
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(
    outer_treedef: PyTreeDef,
    inner_treedef: PyTreeDef | None,
    pytree_to_transpose: Any,
) -> Any:
    """Swaps the outer and inner levels of a tree of trees.

    Args:
      outer_treedef: structure of the outer level.
      inner_treedef: structure of each inner tree; if None it is read from
        the first inner tree.
      pytree_to_transpose: a tree of structure ``outer_treedef`` whose leaves
        are trees of structure ``inner_treedef``.

    Returns:
      A tree of structure ``inner_treedef`` whose leaves are trees of
      structure ``outer_treedef``.

    Raises:
      TypeError: if the leaf count is not ``outer * inner``.

    Example:
      >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)),
      ...                [(1, 2), (3, 4)])
      ([1, 3], [2, 4])
    """
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    n_inner = inner_treedef.num_leaves
    n_outer = outer_treedef.num_leaves
    if treedef.num_leaves != n_inner * n_outer:
        raise TypeError(
            "tree_transpose: the tree does not have the structure "
            f"outer_treedef.compose(inner_treedef).\n  got:      {treedef!r}\n"
            f"  expected: {outer_treedef.compose(inner_treedef)!r}"
        )
    rows = [flat[i * n_inner:(i + 1) * n_inner] for i in range(n_outer)]
    return inner_treedef.unflatten(
        [outer_treedef.unflatten(column) for column in zip(*rows)]
    )


def tree_broadcast(
    prefix_tree: Any,
    full_tree: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Repeats each leaf of a prefix tree over the matching subtree of a full tree.

    Args:
      prefix_tree: a pytree whose structure is a prefix of ``full_tree``'s.
      full_tree: the pytree whose structure the result has.
      is_leaf: optional predicate marking subtrees of ``prefix_tree`` to
        treat as leaves.

    Returns:
      A pytree of ``full_tree``'s structure where every leaf under a leaf
      ``p`` of ``prefix_tree`` is ``p``.

    Raises:
      ValueError: if ``prefix_tree`` is not a prefix of ``full_tree``.

    Example:
      >>> tree_broadcast([1, 2], [(0, 0), {'a': 0}])
      [(1, 1), {'a': 2}]
    """
    leaves, treedef = tree_flatten(prefix_tree, is_leaf)
    try:
        subtrees = treedef.flatten_up_to(full_tree)
    except ValueError as exc:
        raise ValueError(
            f"tree_broadcast: prefix_tree is not a prefix of full_tree.\n{exc}"
        ) from None
    out: list[Any] = []
    for leaf, sub in zip(leaves, subtrees):
        out.extend([leaf] * tree_structure(sub).num_leaves)
    return tree_structure(full_tree).unflatten(out)


# ---------------------------------------------------------------------------
# Key paths.
# ---------------------------------------------------------------------------


class _KeyBase:
    __slots__ = ("_v",)

    def __init__(self, value):
        _object_setattr(self, "_v", value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._v == other._v

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash((type(self).__name__, self._v))

    def __reduce__(self):
        return (type(self), (self._v,))

    def __repr__(self):
        return f"{type(self).__name__}({self.__match_args__[0]}={self._v!r})"


class SequenceKey(_KeyBase):
    """Key of an element of a tuple or list: its index. ``str`` gives ``[i]``.

    Example:
      >>> k = SequenceKey(0)
      >>> k.idx, str(k)
      (0, '[0]')
    """

    __slots__ = ()
    __match_args__ = ("idx",)

    @property
    def idx(self) -> int:
        return self._v

    def __str__(self):
        return f"[{self._v!r}]"


class DictKey(_KeyBase):
    """Key of a dict entry. ``str`` gives ``[repr(key)]``.

    Example:
      >>> str(DictKey('w'))
      "['w']"
    """

    __slots__ = ()
    __match_args__ = ("key",)

    @property
    def key(self) -> Any:
        return self._v

    def __str__(self):
        return f"[{self._v!r}]"


class GetAttrKey(_KeyBase):
    """Key of an attribute (namedtuple field, dataclass field). ``str`` gives ``.name``.

    Example:
      >>> str(GetAttrKey('weight'))
      '.weight'
    """

    __slots__ = ()
    __match_args__ = ("name",)

    @property
    def name(self) -> str:
        return self._v

    def __str__(self):
        return f".{self._v}"


class FlattenedIndexKey(_KeyBase):
    """Key of a child of a custom node registered without keys: its position.

    Example:
      >>> str(FlattenedIndexKey(1))
      '[<flat index 1>]'
    """

    __slots__ = ()
    __match_args__ = ("key",)

    @property
    def key(self) -> int:
        return self._v

    def __str__(self):
        return f"[<flat index {self._v}>]"


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Formats a key path as a string.

    Args:
      keys: a key path (tuple of key entries; other objects are shown with
        ``str``).
      simple: if True, show each key bare (``0``, ``w``, ``name``) instead of
        in its indexing form (``[0]``, ``['w']``, ``.name``).
      separator: string put between the keys.

    Returns:
      The formatted path.

    Example:
      >>> path = (DictKey('layers'), SequenceKey(0), GetAttrKey('w'))
      >>> keystr(path)
      "['layers'][0].w"
      >>> keystr(path, simple=True, separator='/')
      'layers/0/w'
    """
    if simple:
        return separator.join(
            str(k._v) if isinstance(k, _KeyBase) else str(k) for k in keys
        )
    return separator.join(map(str, keys))


def _keyed_children(x, k, t):
    """Returns ``(list of (key, child), data)`` for the node ``x`` of kind k."""
    if k == _TUPLE or k == _LIST:
        return [(SequenceKey(i), c) for i, c in enumerate(x)], None
    if k == _NAMEDTUPLE:
        return [(GetAttrKey(f), c) for f, c in zip(t._fields, x)], None
    if k == _DICT:
        keys = _sorted_keys(x)
        return [(DictKey(key), x[key]) for key in keys], keys
    entry = _registry[t]
    if entry.flatten_with_keys is not None:
        pairs, aux = entry.flatten_with_keys(x)
        return list(pairs), _Aux(aux)
    children, aux = entry.flatten(x)
    return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], _Aux(aux)


def _flatten_with_path(x, path, out, is_leaf):
    if is_leaf is not None and is_leaf(path, x):
        out.append((path, x))
        return None
    t = type(x)
    k = _kind_get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    if k == _LEAF_KIND:
        out.append((path, x))
        return None
    if k == _NONE:
        return _NONE_NODE
    pairs, data = _keyed_children(x, k, t)
    kids = tuple(_flatten_with_path(c, path + (key,), out, is_leaf) for key, c in pairs)
    return (k, t, data, kids)


def tree_flatten_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Flattens a pytree like :func:`tree_flatten`, pairing each leaf with its key path.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.
      is_leaf_takes_path: if True, ``is_leaf`` is called as
        ``is_leaf(path, subtree)`` instead of ``is_leaf(subtree)``.

    Returns:
      ``(path_leaf_pairs, treedef)``, where each path is a tuple of key
      entries (:class:`SequenceKey`, :class:`DictKey`, :class:`GetAttrKey`,
      :class:`FlattenedIndexKey` or a custom node's own keys).

    Example:
      >>> pairs, _ = tree_flatten_with_path({'a': [1, 2]})
      >>> [(keystr(p), v) for p, v in pairs]
      [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    pred = is_leaf
    if is_leaf is not None and not is_leaf_takes_path:
        pred = lambda _path, x: is_leaf(x)  # noqa: E731
    out: list[tuple[KeyPath, Any]] = []
    node = _flatten_with_path(tree, (), out, pred)
    return out, _make_treedef(node, len(out))


def tree_leaves_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> list[tuple[KeyPath, Any]]:
    """Returns ``(key_path, leaf)`` pairs for every leaf of a pytree.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.
      is_leaf_takes_path: if True, ``is_leaf`` takes ``(path, subtree)``.

    Returns:
      The list of pairs, in flattening order.

    Example:
      >>> [keystr(p) for p, _ in tree_leaves_with_path([1, {'k': 2}])]
      ['[0]', "[1]['k']"]
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """Like :func:`tree_map`, but ``f`` also receives each leaf's key path.

    Args:
      f: function called as ``f(path, leaf, *matching_leaves)``.
      tree: the pytree whose structure the result has.
      *rest: more pytrees with ``tree``'s structure (or extending it).
      is_leaf: optional predicate marking subtrees to treat as leaves.
      is_leaf_takes_path: if True, ``is_leaf`` takes ``(path, subtree)``.

    Returns:
      A pytree of ``tree``'s structure.

    Raises:
      ValueError: if a tree in ``rest`` does not match ``tree``'s structure.

    Example:
      >>> tree_map_with_path(lambda p, x: f"{keystr(p)}={x}", {'a': 1, 'b': [2]})
      {'a': "['a']=1", 'b': ["['b'][0]=2"]}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = _flatten_rest("tree_map_with_path", treedef, rest)
    return treedef.unflatten(
        [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)]
        if others
        else [f(p, x) for p, x in pairs]
    )


# ---------------------------------------------------------------------------
# Registration.
# ---------------------------------------------------------------------------


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


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]] | None = None,
) -> None:
    """Makes a type a pytree node type.

    Only values of exactly ``nodetype`` are affected; subclasses stay leaves
    unless registered too.

    Args:
      nodetype: the class to register.
      flatten_func: ``value -> (children, aux_data)``; ``children`` is an
        iterable of pytrees and ``aux_data`` hashable static metadata kept in
        the treedef.
      unflatten_func: ``(aux_data, children) -> value``; ``children`` is a
        tuple.
      flatten_with_keys_func: optional ``value -> (((key, child), ...),
        aux_data)`` giving key-path entries for the children; without it the
        children are keyed by :class:`FlattenedIndexKey`.

    Raises:
      ValueError: if ``nodetype`` is already a pytree node type.

    Example:
      >>> class Pair:
      ...   def __init__(self, a, b): self.a, self.b = a, b
      >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
      ...                      lambda aux, ch: Pair(*ch))
      >>> tree_leaves([Pair(1, 2), 3])
      [1, 2, 3]
    """
    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]] | None = None,
) -> None:
    """Makes a type a pytree node type whose children have key-path entries.

    Args:
      nodetype: the class to register.
      flatten_with_keys: ``value -> (((key, child), ...), aux_data)``.
      unflatten_func: ``(aux_data, children) -> value``.
      flatten_func: optional faster ``value -> (children, aux_data)`` used
        when keys are not needed; it must agree with ``flatten_with_keys``.

    Raises:
      ValueError: if ``nodetype`` is already a pytree node type.

    Example:
      >>> class Box:
      ...   def __init__(self, v): self.v = v
      >>> register_pytree_with_keys(Box, lambda b: (((GetAttrKey('v'), b.v),), None),
      ...                           lambda aux, ch: Box(*ch))
      >>> [keystr(p) for p, _ in tree_leaves_with_path(Box(1))]
      ['.v']
    """
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: Typ) -> Typ:
    """Class decorator registering a class through its own methods.

    The class must define a method ``tree_flatten(self) -> (children, aux)``
    and a classmethod ``tree_unflatten(cls, aux, children)``.

    Args:
      cls: the class.

    Returns:
      ``cls`` itself, so this works as a decorator.

    Example:
      >>> @register_pytree_node_class
      ... class Vec:
      ...   def __init__(self, x, y): self.x, self.y = x, y
      ...   def tree_flatten(self): return (self.x, self.y), None
      ...   @classmethod
      ...   def tree_unflatten(cls, aux, children): return cls(*children)
      >>> tree_leaves(Vec(1, 2))
      [1, 2]
    """
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: Typ) -> Typ:
    """Class decorator like :func:`register_pytree_node_class`, with keys.

    The class must define ``tree_flatten_with_keys(self) -> (((key, child),
    ...), aux)`` and the classmethod ``tree_unflatten``; ``tree_flatten`` is
    used too when present.

    Args:
      cls: the class.

    Returns:
      ``cls`` itself.

    Example:
      >>> @register_pytree_with_keys_class
      ... class Named:
      ...   def __init__(self, w): self.w = w
      ...   def tree_flatten_with_keys(self): return ((GetAttrKey('w'), self.w),), None
      ...   @classmethod
      ...   def tree_unflatten(cls, aux, children): return cls(*children)
      >>> [keystr(p) for p, _ in tree_leaves_with_path(Named(1))]
      ['.w']
    """
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(
        cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten, flatten
    )
    return cls


def register_dataclass(
    nodetype: Typ,
    data_fields: Iterable[str] | None = None,
    meta_fields: Iterable[str] | None = None,
    drop_fields: Iterable[str] = (),
) -> Typ:
    """Registers a dataclass-like type whose fields are children or static metadata.

    Data fields become children (keyed by :class:`GetAttrKey`); meta fields
    are stored in the treedef and must be hashable. Values are rebuilt with
    ``nodetype(**fields)``.

    Args:
      nodetype: the class. If it is a dataclass, ``data_fields`` and
        ``meta_fields`` may both be omitted: fields declared with
        ``dataclasses.field(metadata=dict(static=True))`` are meta fields and
        the others data fields.
      data_fields: names of the fields that are pytree children.
      meta_fields: names of the static fields.
      drop_fields: for a dataclass, ``init`` fields to leave out of the
        registration.

    Returns:
      ``nodetype`` itself, so this works as a decorator.

    Raises:
      TypeError: if only one of ``data_fields``/``meta_fields`` is given, or
        neither is given for a non-dataclass.
      ValueError: if the fields do not cover exactly the dataclass's ``init``
        fields, overlap, or the type is already registered.

    Example:
      >>> import dataclasses
      >>> @register_dataclass
      ... @dataclasses.dataclass
      ... class Layer:
      ...   w: float
      ...   name: str = dataclasses.field(default='l', metadata=dict(static=True))
      >>> tree_structure(Layer(1.0))
      PyTreeDef(CustomNode(Layer[('l',)], [*]))
    """
    import dataclasses  # only needed here; it is slow to import

    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: give both data_fields and meta_fields, or "
                f"neither; got data_fields={data_fields!r}, "
                f"meta_fields={meta_fields!r}."
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields can only be "
                f"inferred for a dataclass; {nodetype!r} is not one."
            )
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    # Copy now: the closures below must not see later changes by the caller.
    data_names = tuple(data_fields)
    meta_names = tuple(meta_fields)
    drop = set(drop_fields)

    if dataclasses.is_dataclass(nodetype):
        init_names = {f.name for f in dataclasses.fields(nodetype) if f.init} - drop
        given = set(data_names) | set(meta_names)
        if given != init_names:
            problems = []
            if init_names - given:
                problems.append(
                    f"missing init fields {sorted(init_names - given)} (list "
                    "them in drop_fields to leave them out on purpose)"
                )
            if given - init_names:
                problems.append(f"unknown or non-init fields {sorted(given - init_names)}")
            raise ValueError(
                f"register_dataclass({nodetype.__name__}): data_fields and "
                "meta_fields must name exactly the dataclass's init fields; "
                + "; ".join(problems) + "."
            )
    overlap = set(data_names) & set(meta_names)
    if overlap:
        raise ValueError(
            f"register_dataclass({nodetype.__name__}): fields {sorted(overlap)} "
            "are listed as both data and meta fields."
        )

    def flatten(x):
        return (
            [getattr(x, n) for n in data_names],
            tuple([getattr(x, n) for n in meta_names]),
        )

    def flatten_with_keys(x):
        return (
            [(GetAttrKey(n), getattr(x, n)) for n in data_names],
            tuple([getattr(x, n) for n in meta_names]),
        )

    def unflatten(meta, data):
        kwargs = dict(zip(meta_names, meta))
        kwargs.update(zip(data_names, data))
        return nodetype(**kwargs)

    _register(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def register_static(cls: Typ) -> Typ:
    """Registers a type as a node with no children: its values live in the treedef.

    Instances become part of the structure (as metadata), so they must be
    hashable; transformations then treat them as static.

    Args:
      cls: the class.

    Returns:
      ``cls`` itself, so this works as a decorator.

    Example:
      >>> @register_static
      ... class Mode(str): pass
      >>> tree_leaves([Mode('train'), 1])
      [1]
    """
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


# Standard-library containers beyond the built-in kinds.

def _ordered_dict_with_keys(d):
    keys = tuple(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _ordered_dict_flatten(d):
    keys = tuple(d)
    return [d[k] for k in keys], keys


def _ordered_dict_unflatten(keys, values):
    return collections.OrderedDict(zip(keys, values))


def _defaultdict_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


def _defaultdict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _defaultdict_unflatten(aux, values):
    factory, keys = aux
    return collections.defaultdict(factory, zip(keys, values))


register_pytree_with_keys(
    collections.OrderedDict,
    _ordered_dict_with_keys,
    _ordered_dict_unflatten,
    _ordered_dict_flatten,
)
register_pytree_with_keys(
    collections.defaultdict,
    _defaultdict_with_keys,
    _defaultdict_unflatten,
    _defaultdict_flatten,
)


# ---------------------------------------------------------------------------
# Partial.
# ---------------------------------------------------------------------------


class _OpaqueCallable:
    """Wraps a functools.partial so Partial keeps it as one opaque function.

    ``functools.partial(p, ...)`` merges ``p``'s own arguments into the new
    object when ``p`` is a plain partial; those arguments would then become
    pytree leaves. Wrapping prevents the merge.
    """

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    @property
    def func(self):
        return self.fn.func

    @property
    def args(self):
        return self.fn.args

    @property
    def keywords(self):
        return self.fn.keywords

    def __eq__(self, other):
        if type(other) is _OpaqueCallable:
            return self.fn == other.fn
        return self.fn == other

    def __hash__(self):
        return hash(self.fn)

    def __repr__(self):
        return repr(self.fn)

    def __reduce__(self):
        return (_OpaqueCallable, (self.fn,))


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree.

    The bound positional and keyword arguments are the children; the wrapped
    function is static metadata. This lets a partially applied function be
    passed through transformations, with its bound arguments traced.

    Example:
      >>> import operator
      >>> add_one = Partial(operator.add, 1)
      >>> add_one(2)
      3
      >>> tree_leaves(add_one)
      [1]
      >>> tree_map(lambda x: x * 10, add_one)(2)
      12
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _OpaqueCallable(func)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)

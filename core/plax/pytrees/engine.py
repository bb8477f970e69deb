"""The pytree engine: flattening, unflattening, and :class:`PyTreeDef`.

The walkers here are the hot path of every transformation (jit's cache key is a treedef),
so they bind their globals as default arguments and compile repeated unflattenings into
generated builder functions. Imports only the standard library.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterable
    from typing import Any

from plax.pytrees.keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, keystr
from plax.pytrees.nodes import (_CUSTOM, _DICT, _LEAF_KIND, _LIST, _NAMEDTUPLE, _NONE, _TUPLE,
                                _UNSEEN, _Aux, _classify, _kind_get, _NoneType, _registry,
                                _sorted_keys)

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
            # False, not NotImplemented, as JAX: the reflected __eq__ of a foreign object
            # could raise or (a NumPy array) return an elementwise array.
            return False
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

"""Pytrees: nested containers of leaves, and the utilities that walk them.

A *pytree* is a value built from container *nodes* (tuples, lists, dicts,
``None``, namedtuples, ``OrderedDict``, ``defaultdict`` and any type registered
with :func:`register_pytree_node` and friends) whose non-container parts are
*leaves*. Every plax transformation flattens its arguments into a list of
leaves plus a :class:`PyTreeDef` describing the structure, works on the
leaves, and rebuilds the structure afterwards.

The semantics follow ``jax.tree_util``. This module is the public API; the
encoding, the flatten/unflatten engine and key paths live in :mod:`plax.pytrees`.
Both are a leaf of the plax core: they import only the standard library.
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

from plax.pytrees.engine import (_NONE_NODE, PyTreeDef, _make_treedef, tree_flatten, tree_leaves,
                                 tree_structure, tree_unflatten)
from plax.pytrees.keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, keystr
from plax.pytrees.nodes import (_CUSTOM, _DICT, _LEAF_KIND, _LIST, _NAMEDTUPLE, _NONE, _TUPLE,
                                _UNSEEN, _Aux, _classify, _kind_get, _register, _registry,
                                _sorted_keys)

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
    "flatten_one_level_with_keys",
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
      ``(children, metadata)`` as the node's flatten gives them (as in JAX): a tuple of
      children for tuples, dicts and None, a list for lists and namedtuples; the metadata of a
      dict is its sorted keys, of a namedtuple its class.

    Raises:
      ValueError: if ``tree`` is a leaf.

    Example:
      >>> flatten_one_level({'a': [1, 2], 'b': {'c': 3}})
      (([1, 2], {'c': 3}), ('a', 'b'))
    """
    t = type(tree)
    k = _kind_get(t, _UNSEEN)
    if k == _UNSEEN:
        k = _classify(t)
    # As in JAX, the children come as the node's flatten produces them: a tuple for tuples,
    # dicts and None, a list for lists and namedtuples (whose metadata is their class).
    if k == _TUPLE:
        return tuple(tree), None
    if k == _LIST:
        return list(tree), None
    if k == _NAMEDTUPLE:
        return list(tree), t
    if k == _DICT:
        keys = _sorted_keys(tree)
        return tuple(tree[key] for key in keys), keys
    if k == _NONE:
        return (), None
    if k == _CUSTOM:
        return _registry[t].flatten(tree)
    raise ValueError(f"can't tree-flatten type: {t!r} (it is a pytree leaf)")


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[Any, Any]], Any]:
    """:func:`flatten_one_level` with each child's key: ``((key, child), ...)`` and the
    node's metadata.

    Args:
      tree: a pytree node (not a leaf).

    Returns:
      ``(pairs, metadata)``: the pairs in a tuple (a list for a namedtuple, as in JAX).

    Raises:
      ValueError: if ``tree`` is a leaf.

    Example:
      >>> flatten_one_level_with_keys({'a': 1, 'b': (2, 3)})
      (((DictKey(key='a'), 1), (DictKey(key='b'), (2, 3))), ('a', 'b'))
    """
    children, meta = flatten_one_level(tree)
    # the children are the leaves when everything below the node counts as a leaf
    paths = tree_flatten_with_path(tree, is_leaf=lambda x: x is not tree)[0]
    pairs = [(path[0], child) for (path, _), child in zip(paths, children)]
    # a list for a namedtuple (whose flatten gives one), a tuple otherwise, as in JAX
    return (pairs if isinstance(children, list) and type(tree) is not list
            else tuple(pairs)), meta


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

"""Tests for plax.tree_util and plax.tree.

Timings in microseconds (Python 3.11 on a 2-core VM, best of 2 x 30 timeit
runs; JAX 0.10.2's tree_util is C++). Print them with:

    cd /work/wt-tree && PYTHONPATH=core /work/venv/bin/python tests/test_tree_util.py

    operation                               plax     jax
    tree_flatten((a, b))                    0.31    0.32
    tree_unflatten((a, b))                  0.15    0.16
    tree_unflatten(small), reused def       0.27    0.27
    tree_unflatten(small), fresh def        1.4     0.31
    tree_flatten(small)                     2.1     0.62
    tree_leaves(small)                      1.4     0.63
    tree_map(f, small)                      2.8     2.1

``a`` and ``b`` are NumPy arrays and ``small`` is
``{'w': a, 'b': (b, [a, None]), 'c': 1.0}``. "Reused def" is the jit case: a
PyTreeDef unflattened many times gets a generated builder function.
"""

from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import doctest
import functools
import operator
import pathlib
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax.tree as ptree
import plax.tree_util as tu
from plax.pytrees import engine, nodes
from plax.tree_util import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Partial,
    PyTreeDef,
    SequenceKey,
)

REPO = pathlib.Path(__file__).resolve().parents[1]
TREE_UTIL_PATH = REPO / "core" / "plax" / "tree_util.py"

Point = collections.namedtuple("Point", ["x", "y"])
Other = collections.namedtuple("Other", ["x", "y"])


def same(a, b) -> bool:
    """Equality that also requires equal container types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        # Only OrderedDict promises an order; dicts come back key-sorted.
        keys_match = list(a) == list(b) if type(a) is collections.OrderedDict else set(a) == set(b)
        return keys_match and all(same(a[k], b[k]) for k in a) and (
            not isinstance(a, collections.defaultdict)
            or a.default_factory is b.default_factory
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a is b
    return a == b


# Custom node types used across tests. They are registered once, at import.


class Box:
    """Registered without keys: children get FlattenedIndexKey."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return (
            type(other) is Box
            and (self.a, self.b, self.tag) == (other.a, other.b, other.tag)
        )

    def __repr__(self):
        return f"Box({self.a!r}, {self.b!r}, {self.tag!r})"


tu.register_pytree_node(
    Box, lambda x: ((x.a, x.b), x.tag), lambda tag, ch: Box(*ch, tag=tag)
)


class Keyed:
    """Registered with keys."""

    def __init__(self, w, bias):
        self.w, self.bias = w, bias

    def __eq__(self, other):
        return type(other) is Keyed and (self.w, self.bias) == (other.w, other.bias)


tu.register_pytree_with_keys(
    Keyed,
    lambda x: (((GetAttrKey("w"), x.w), (GetAttrKey("bias"), x.bias)), None),
    lambda aux, ch: Keyed(*ch),
)


@tu.register_pytree_node_class
class Vec:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def tree_flatten(self):
        return (self.x, self.y), "vec"

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "vec"
        return cls(*children)

    def __eq__(self, other):
        return type(other) is Vec and (self.x, self.y) == (other.x, other.y)


# ---------------------------------------------------------------------------
# Flatten / unflatten of the built-in node types.
# ---------------------------------------------------------------------------

BUILTIN_CASES = [
    # (tree, leaves, repr of structure)
    (1, [1], "PyTreeDef(*)"),
    (None, [], "PyTreeDef(None)"),
    ((), [], "PyTreeDef(())"),
    ([], [], "PyTreeDef([])"),
    ({}, [], "PyTreeDef({})"),
    ((1,), [1], "PyTreeDef((*,))"),
    ((None, 1), [1], "PyTreeDef((None, *))"),
    (
        [1, {"k1": 2, "k2": (3, 4)}, 5],
        [1, 2, 3, 4, 5],
        "PyTreeDef([*, {'k1': *, 'k2': (*, *)}, *])",
    ),
    ({"b": 1, "a": 2}, [2, 1], "PyTreeDef({'a': *, 'b': *})"),
    ({1: "x", 2: "y"}, ["x", "y"], "PyTreeDef({1: *, 2: *})"),
    ({"a": [1, None, {}]}, [1], "PyTreeDef({'a': [*, None, {}]})"),
    (Point(1, (2, 3)), [1, 2, 3], "PyTreeDef(CustomNode(namedtuple[Point], [*, (*, *)]))"),
    (
        collections.OrderedDict([("b", 1), ("a", 2)]),
        [1, 2],
        "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))",
    ),
    (
        collections.defaultdict(list, {"b": 1, "a": 2}),
        [2, 1],
        "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [*, *]))",
    ),
    ("a string", ["a string"], "PyTreeDef(*)"),
]


@pytest.mark.parametrize("tree,leaves,structure", BUILTIN_CASES)
def test_flatten_builtin_nodes(tree, leaves, structure):
    got_leaves, treedef = tu.tree_flatten(tree)
    assert got_leaves == leaves
    assert repr(treedef) == structure
    assert str(treedef) == structure
    assert treedef.num_leaves == len(leaves)
    assert tu.tree_leaves(tree) == leaves
    assert tu.tree_structure(tree) == treedef
    assert same(tu.tree_unflatten(treedef, got_leaves), tree)


def test_flatten_returns_fresh_list_for_flat_sequences():
    a, b = object(), object()
    tree = [a, b]
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [a, b] and leaves is not tree
    rebuilt = treedef.unflatten(leaves)
    assert rebuilt == [a, b] and rebuilt is not leaves
    assert tu.tree_flatten((a, b))[1] == tu.treedef_tuple([tu.tree_structure(a)] * 2)


def test_dict_keys_sorted_and_unflatten_in_sorted_order():
    tree = {"c": 1, "a": 2, "b": 3}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [2, 3, 1]
    out = treedef.unflatten([10, 20, 30])
    assert list(out) == ["a", "b", "c"]
    assert out == {"a": 10, "b": 20, "c": 30}
    # Insertion order does not matter for the structure.
    assert tu.tree_structure({"a": 0, "b": 0}) == tu.tree_structure({"b": 0, "a": 0})


def test_dict_with_unorderable_keys_raises():
    with pytest.raises(ValueError, match="sort the keys"):
        tu.tree_flatten({1: "a", "b": 2})


def test_none_is_a_node_without_leaves():
    assert tu.tree_leaves([None, 1]) == [1]
    assert tu.tree_leaves(None) == []
    treedef = tu.tree_structure(None)
    assert treedef.num_leaves == 0 and treedef.num_nodes == 1
    assert treedef.unflatten([]) is None
    assert tu.tree_map(lambda x: x * 2, [1, None, {"a": 3}]) == [2, None, {"a": 6}]
    assert tu.tree_structure([None]) != tu.tree_structure([()])


def test_leaf_types():
    arr = np.arange(3)
    for leaf in [arr, 1.5, "s", b"b", object(), np.float32(1), {1, 2}, frozenset()]:
        leaves, treedef = tu.tree_flatten(leaf)
        assert leaves[0] is leaf
        assert tu.treedef_is_leaf(treedef) and treedef.num_leaves == 1
    # Subclasses of built-in containers are leaves (dispatch is on exact type).
    MyDict = type("MyDict", (dict,), {})
    MyList = type("MyList", (list,), {})
    MyTuple = type("MyTuple", (tuple,), {})
    for leaf in [MyDict(a=1), MyList([1]), MyTuple((1, 2))]:
        assert tu.tree_leaves(leaf) == [leaf]


def test_tuple_subclass_with_fields_is_a_namedtuple():
    FakeNT = type("FakeNT", (tuple,), {"_fields": ("a", "b")})
    v = FakeNT((1, 2))
    leaves, treedef = tu.tree_flatten(v)
    assert leaves == [1, 2]
    assert repr(treedef) == "PyTreeDef(CustomNode(namedtuple[FakeNT], [*, *]))"


def test_namedtuple_roundtrip_and_type_identity():
    p = Point(1, [2, 3])
    leaves, treedef = tu.tree_flatten(p)
    out = treedef.unflatten([4, 5, 6])
    assert type(out) is Point and out == Point(4, [5, 6])
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure(Other(1, 2))
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))
    assert treedef.node_data() == (Point, None)


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(od)
    assert leaves == [1, 2]
    out = treedef.unflatten([3, 4])
    assert type(out) is collections.OrderedDict
    assert list(out.items()) == [("z", 3), ("a", 4)]
    other = collections.OrderedDict([("a", 2), ("z", 1)])
    assert tu.tree_structure(other) != treedef
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(od)] == ["['z']", "['a']"]


def test_defaultdict_keeps_factory_and_sorts_keys():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(dd)
    assert leaves == [2, 1]
    out = treedef.unflatten([5, 6])
    assert type(out) is collections.defaultdict
    assert out.default_factory is list
    assert list(out.items()) == [("a", 5), ("b", 6)]
    assert tu.tree_structure(collections.defaultdict(int, {"b": 1, "a": 2})) != treedef
    assert treedef.node_data() == (collections.defaultdict, (list, ("a", "b")))
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(dd)] == ["['a']", "['b']"]


def test_unflatten_accepts_any_iterable():
    treedef = tu.tree_structure({"a": (0, 0), "b": [0]})
    expected = {"a": (1, 2), "b": [3]}
    assert treedef.unflatten(iter([1, 2, 3])) == expected
    assert treedef.unflatten(x for x in (1, 2, 3)) == expected
    assert tu.tree_unflatten(treedef, (1, 2, 3)) == expected
    assert tu.tree_structure(7).unflatten(iter(["x"])) == "x"


@pytest.mark.parametrize("n", [1, 3])
def test_unflatten_wrong_leaf_count(n):
    treedef = tu.tree_structure((0, 0))
    with pytest.raises(ValueError) as info:
        treedef.unflatten(list(range(n)))
    msg = str(info.value)
    assert "expected 2" in msg and f"got {n}" in msg
    assert "PyTreeDef((*, *))" in msg
    assert ("few" if n < 2 else "many") in msg
    with pytest.raises(ValueError, match="expected 1, got 0"):
        tu.tree_unflatten(tu.tree_structure(1), [])


def test_repeated_unflatten_uses_generated_builder_correctly():
    trees = [
        {"w": 1, "b": (2, [3, None]), "c": 4.0},
        Point(1, (2, {"q": 3})),
        [Box(1, [2, 3], tag="zz"), collections.OrderedDict(y=1, x=2)],
        collections.defaultdict(dict, {"k": [1, (2,)]}),
        Vec(1, (2, None)),
        (),
        [()],
        None,
        ((1,),),
    ]
    for tree in trees:
        leaves, treedef = tu.tree_flatten(tree)
        new_leaves = [f"leaf{i}" for i in range(len(leaves))]
        expected = tu.tree_unflatten(treedef, new_leaves)
        for _ in range(3 * engine._COMPILE_AFTER):
            got = treedef.unflatten(new_leaves)
            assert same(got, expected), (tree, got)
        # The generated builder must also make fresh containers each time.
        assert treedef.unflatten(new_leaves) is not treedef.unflatten(new_leaves) or tree in (None, ())
        with pytest.raises(ValueError, match="leaves"):
            treedef.unflatten(new_leaves + ["extra"])


def test_deep_tree_roundtrip():
    tree = 0
    for i in range(300):
        tree = [tree, {"k": i}] if i % 2 else (tree,)
    leaves, treedef = tu.tree_flatten(tree)
    assert len(leaves) == 151  # the innermost 0 plus one per list level
    for _ in range(engine._COMPILE_AFTER + 2):  # too deep to generate: keeps walking
        assert same(treedef.unflatten(leaves), tree)


def test_large_flat_list_roundtrip():
    tree = list(range(5000))
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == tree and treedef.num_leaves == 5000
    assert treedef.unflatten(leaves) == tree
    mixed = list(range(3000)) + [(1, 2)]
    leaves, treedef = tu.tree_flatten(mixed)
    for _ in range(engine._COMPILE_AFTER + 2):
        assert treedef.unflatten(leaves) == mixed


# ---------------------------------------------------------------------------
# is_leaf.
# ---------------------------------------------------------------------------


def test_is_leaf_stops_descent():
    tree = [(1, 2), [3], {"a": (4,)}]
    leaves, treedef = tu.tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3, (4,)]
    assert repr(treedef) == "PyTreeDef([*, [*], {'a': *}])"
    assert tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple)) == leaves


def test_is_leaf_on_root_and_on_none():
    assert tu.tree_flatten((1, 2), is_leaf=lambda x: isinstance(x, tuple)) == (
        [(1, 2)],
        tu.tree_structure(0),
    )
    leaves, treedef = tu.tree_flatten([None, 1], is_leaf=lambda x: x is None)
    assert leaves == [None, 1] and repr(treedef) == "PyTreeDef([*, *])"


def test_is_leaf_called_once_per_subtree_in_order():
    calls = []
    tree = [1, (2, None), {"b": 3, "a": 4}]
    tu.tree_flatten(tree, is_leaf=lambda x: calls.append(x) or False)
    assert calls == [tree, 1, (2, None), 2, None, {"b": 3, "a": 4}, 4, 3]


def test_is_leaf_in_map_reduce_all():
    tree = {"a": (1, 2), "b": (3, 4)}
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    assert tu.tree_map(sum, tree, is_leaf=is_pair) == {"a": 3, "b": 7}
    assert tu.tree_reduce(lambda acc, x: acc + [x], tree, [], is_leaf=is_pair) == [(1, 2), (3, 4)]
    assert tu.tree_all([(0, 0)], is_leaf=is_pair) is True
    assert tu.tree_all([(0, 0)]) is False


# ---------------------------------------------------------------------------
# PyTreeDef.
# ---------------------------------------------------------------------------


def test_treedef_is_immutable_and_not_constructible():
    treedef = tu.tree_structure([1, 2])
    with pytest.raises(AttributeError):
        treedef.num_leaves = 3
    with pytest.raises(AttributeError):
        treedef.new_attribute = 1
    with pytest.raises(TypeError):
        PyTreeDef()
    assert treedef.num_leaves == 2


def test_treedef_hash_and_equality():
    a = tu.tree_structure({"a": [1, 2], "b": None})
    b = tu.tree_structure({"b": None, "a": ["x", "y"]})
    c = tu.tree_structure({"a": (1, 2), "b": None})
    assert a == b and not (a != b) and hash(a) == hash(b)
    assert a != c and not (a == c)
    assert a != "PyTreeDef({'a': [*, *], 'b': None})"
    assert tu.tree_structure((1, 2)) != tu.tree_structure([1, 2])
    assert tu.tree_structure(()) != tu.tree_structure(None)
    assert {a: "x"}[b] == "x"
    assert len({a, b, c}) == 2
    assert tu.tree_structure(Box(1, 2, "p")) != tu.tree_structure(Box(1, 2, "q"))
    assert tu.tree_structure(Box(1, 2, "p")) == tu.tree_structure(Box(3, 4, "p"))


def test_treedef_with_unhashable_or_array_aux():
    class Meta:
        def __init__(self, v):
            self.v = v

    tu.register_pytree_node(Meta, lambda m: ((), m.v), lambda aux, _: Meta(aux))
    t1 = tu.tree_structure(Meta([1, 2]))
    t2 = tu.tree_structure(Meta([1, 2]))
    assert t1 == t2 and hash(t1) == hash(t2)  # list aux: hashable treedef
    assert t1 != tu.tree_structure(Meta([3]))
    ta = tu.tree_structure(Meta(np.arange(3)))
    tb = tu.tree_structure(Meta(np.arange(3)))
    with pytest.raises(ValueError, match="arrays are not valid"):
        _ = ta == tb


def test_treedef_counts_children_node_data():
    treedef = tu.tree_structure([1, {"k1": 2, "k2": (3, 4)}, None])
    assert treedef.num_leaves == 4
    assert treedef.num_nodes == 8
    kids = treedef.children()
    assert [repr(k) for k in kids] == [
        "PyTreeDef(*)",
        "PyTreeDef({'k1': *, 'k2': (*, *)})",
        "PyTreeDef(None)",
    ]
    assert [k.num_leaves for k in kids] == [1, 3, 0]
    assert tu.treedef_children(treedef) == kids
    assert treedef.node_data() == (list, None)
    assert kids[1].node_data() == (dict, ["k1", "k2"])
    assert kids[2].node_data() == (type(None), None)
    assert kids[0].node_data() is None and kids[0].children() == []
    assert tu.tree_structure((1,)).node_data() == (tuple, None)
    assert tu.tree_structure(Box(1, 2, "tg")).node_data() == (Box, "tg")


def test_treedef_repr_of_custom_nodes():
    tree = [Point(1, 2), Box(1, {"a": None}, "aux"), Vec(1, 2)]
    assert repr(tu.tree_structure(tree)) == (
        "PyTreeDef([CustomNode(namedtuple[Point], [*, *]), "
        "CustomNode(Box[aux], [*, {'a': None}]), CustomNode(Vec[vec], [*, *])])"
    )


def test_treedef_pickle_and_copy():
    for tree in [[1, {"a": (2, None)}], Point(1, 2), collections.OrderedDict(a=1), 5, None]:
        treedef = tu.tree_structure(tree)
        for clone in (pickle.loads(pickle.dumps(treedef)), copy.copy(treedef), copy.deepcopy(treedef)):
            assert clone == treedef and hash(clone) == hash(treedef)
            assert same(clone.unflatten(tu.tree_leaves(tree)), tree)


def test_treedef_compose_and_from_iterable_tree():
    outer = tu.tree_structure((0, 0))
    inner = tu.tree_structure([0, {"a": 0}])
    composed = outer.compose(inner)
    assert repr(composed) == "PyTreeDef(([*, {'a': *}], [*, {'a': *}]))"
    assert composed.num_leaves == 4
    assert composed == tu.tree_structure(([0, {"a": 0}], [0, {"a": 0}]))


def test_treedef_tuple_and_is_leaf():
    x, y = [1, 2, 3], {"a": 4, "b": 5}
    xy = tu.treedef_tuple([tu.tree_structure(x), tu.tree_structure(y)])
    assert xy == tu.tree_structure((x, y))
    assert xy.num_leaves == 5
    assert xy.unflatten(range(5)) == ([0, 1, 2], {"a": 3, "b": 4})
    assert tu.treedef_tuple(iter([])) == tu.tree_structure(())
    assert tu.treedef_is_leaf(tu.tree_structure(1))
    assert not tu.treedef_is_leaf(tu.tree_structure([1]))
    # As in JAX, a single-node structure counts, even without leaves.
    assert tu.treedef_is_leaf(tu.tree_structure(None))
    assert tu.treedef_is_leaf(tu.tree_structure(()))


def test_build_tree():
    treedef = tu.tree_structure({"b": [0, 0], "a": 0})
    assert tu.build_tree(treedef, [7, [8, 9]]) == {"a": 7, "b": [8, 9]}
    assert tu.build_tree(tu.tree_structure((1, (2, 3))), [1, (5, [6])]) == (1, (5, [6]))
    assert tu.build_tree(tu.tree_structure([1, None]), [1, []]) == [1, None]
    nt = tu.build_tree(tu.tree_structure(Point(0, 0)), (1, 2))
    assert type(nt) is Point and nt == Point(1, 2)
    with pytest.raises(ValueError, match="has 2 children"):
        tu.build_tree(treedef, [7, [8]])


# ---------------------------------------------------------------------------
# flatten_up_to and structure-mismatch errors.
# ---------------------------------------------------------------------------


def test_flatten_up_to_prefix():
    treedef = tu.tree_structure([0, 0])
    assert treedef.flatten_up_to([(1, 2), {"a": 3}]) == [(1, 2), {"a": 3}]
    assert tu.tree_structure(1).flatten_up_to({"a": (1, 2)}) == [{"a": (1, 2)}]
    assert tu.tree_structure((None, 0)).flatten_up_to((None, [1])) == [[1]]
    # A leaf in the structure matches None in the tree.
    assert tu.tree_structure((1, 1)).flatten_up_to((None, 1)) == [None, 1]


MISMATCH_CASES = [
    # (structure source, value, message fragment, key path)
    ((0, 0), (1, 2, 3), "Tuple arity mismatch: 3 != 2; tuple: (1, 2, 3).", "(root)"),
    ([0, (0, 0)], [1, (2, 3, 4)], "Tuple arity mismatch: 3 != 2", "[1]"),
    ([0, 0], [1], "List arity mismatch: 1 != 2; list: [1].", "(root)"),
    ((0, 0), [1, 2], "Expected tuple, got [1, 2].", "(root)"),
    ((0, 0), 1, "Expected tuple, got 1.", "(root)"),
    ({"a": 0}, {"b": 1}, "Dict key mismatch; expected keys: ['a']; present keys: ['b'].", "(root)"),
    ({"x": {"a": 0}}, {"x": {"a": 1, "b": 2}}, "Dict key mismatch", "['x']"),
    ({"a": 0}, [1], "Expected dict, got [1].", "(root)"),
    ((None, 0), (2, 1), "Expected None, got 2.", "[0]"),
    (Point(0, 0), Other(1, 2), "Named tuple type mismatch", "(root)"),
    (Point(0, 0), (1, 2), "Expected named tuple, got (1, 2).", "(root)"),
    (Box(0, 0), (1, 2), "Custom node type mismatch", "(root)"),
    (Box(0, 0, "p"), Box(1, 2, "q"), "Mismatch custom node data: 'p' != 'q'", "(root)"),
    ({"k": Box(0, [0])}, {"k": Box(0, [1, 2])}, "List arity mismatch: 2 != 1", "['k'][<flat index 1>]"),
    (Keyed(0, (0,)), Keyed(0, (0, 0)), "Tuple arity mismatch", ".bias"),
    (
        collections.OrderedDict(a=0, b=0),
        collections.OrderedDict(b=1, a=2),
        "Mismatch custom node data: ('a', 'b') != ('b', 'a')",
        "(root)",
    ),
]


@pytest.mark.parametrize("source,value,fragment,path", MISMATCH_CASES)
def test_flatten_up_to_mismatch_errors(source, value, fragment, path):
    treedef = tu.tree_structure(source)
    with pytest.raises(ValueError) as info:
        treedef.flatten_up_to(value)
    msg = str(info.value)
    assert fragment in msg
    assert f"at key path: {path}\n" in msg
    assert repr(treedef) in msg
    assert repr(tu.tree_structure(value)) in msg


def test_custom_arity_mismatch():
    class Var:
        def __init__(self, *items):
            self.items = items

        def __repr__(self):
            return f"Var{self.items}"

    tu.register_pytree_node(Var, lambda v: (v.items, None), lambda _, ch: Var(*ch))
    with pytest.raises(ValueError, match=r"Custom type arity mismatch: 3 != 2; value: Var\(1, 2, 3\)"):
        tu.tree_structure(Var(0, 0)).flatten_up_to(Var(1, 2, 3))


# ---------------------------------------------------------------------------
# tree_map and friends.
# ---------------------------------------------------------------------------


def test_tree_map_single_and_multiple():
    tree = {"a": 1, "b": (2, [3])}
    assert tu.tree_map(lambda x: x + 1, tree) == {"a": 2, "b": (3, [4])}
    out = tu.tree_map(lambda x, y, z: x + y * z, tree, {"a": 1, "b": (1, [1])}, {"b": (2, [3]), "a": 10})
    assert out == {"a": 11, "b": (4, [6])}
    assert type(out["b"]) is tuple


def test_tree_map_rest_may_extend_first_structure():
    out = tu.tree_map(lambda x, y: (x, y), [1, 2], [(1, 2), {"a": 3}])
    assert out == [(1, (1, 2)), (2, {"a": 3})]
    out = tu.tree_map(lambda x, y: (x, y), [1, 2], [None, (3,)])
    assert out == [(1, None), (2, (3,))]


def test_tree_map_call_order_follows_leaf_order():
    seen = []
    tu.tree_map(lambda x: seen.append(x), {"b": 1, "a": [2, 3]})
    assert seen == [2, 3, 1]


@pytest.mark.parametrize(
    "first,second,fragment",
    [
        ((1, 2), (1, 2, 3), "Tuple arity mismatch: 3 != 2"),
        ([1, (2, 3)], [1, (2, 3, 4)], "Tuple arity mismatch: 3 != 2"),
        (Box(1, 2), (1, 2), "Custom node type mismatch"),
        ({"a": 1}, {"b": 1}, "Dict key mismatch"),
        ([None, 1], [1, 1], "Expected None, got 1."),
    ],
)
def test_tree_map_structure_mismatch(first, second, fragment):
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda *xs: xs[0], first, second)
    msg = str(info.value)
    assert msg.startswith("tree_map: the 2nd tree")
    assert fragment in msg
    assert repr(tu.tree_structure(first)) in msg
    assert repr(tu.tree_structure(second)) in msg


def test_tree_map_names_the_offending_tree():
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda *xs: 0, [1, (2, 3)], [1, (2, 3)], [1, (2, 3, 4)])
    assert "the 3rd tree" in str(info.value)
    assert "at key path: [1]" in str(info.value)


def test_tree_map_with_path():
    tree = {"a": 1, "b": [2, Point(3, 4)]}
    out = tu.tree_map_with_path(lambda p, x: (tu.keystr(p), x), tree)
    assert out == {
        "a": ("['a']", 1),
        "b": [("['b'][0]", 2), Point(("['b'][1].x", 3), ("['b'][1].y", 4))],
    }
    out = tu.tree_map_with_path(lambda p, x, y: x + y, [1, 2], [10, 20])
    assert out == [11, 22]
    with pytest.raises(ValueError, match="tree_map_with_path: the 2nd tree"):
        tu.tree_map_with_path(lambda p, x, y: x, [1, 2], [1])
    out = tu.tree_map_with_path(
        lambda p, x: len(p), [(1, 2), 3], is_leaf=lambda p, x: len(p) == 1, is_leaf_takes_path=True
    )
    assert out == [1, 1]


def test_tree_reduce():
    assert tu.tree_reduce(operator.add, [1, (2, 3), {"a": 4}]) == 10
    assert tu.tree_reduce(operator.add, [1, 2], 100) == 103
    assert tu.tree_reduce(operator.add, [], 0) == 0
    assert tu.tree_reduce(lambda a, b: a + [b], {"b": 1, "a": 2}, []) == [2, 1]
    with pytest.raises(TypeError):
        tu.tree_reduce(operator.add, [])
    with pytest.raises(TypeError):
        tu.tree_reduce(operator.add, {"a": None})


def test_tree_reduce_associative():
    assert tu.tree_reduce_associative(operator.add, [1, (2, 3), {"a": 4}]) == 10
    assert tu.tree_reduce_associative(lambda a, b: f"({a}{b})", [1, 2, 3, 4]) == "((12)(34))"
    assert tu.tree_reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError):
        tu.tree_reduce_associative(operator.add, [None])


def test_tree_all():
    assert tu.tree_all([True, {"a": 1}]) is True
    assert tu.tree_all([True, (0,)]) is False
    assert tu.tree_all([]) is True
    assert tu.tree_all(None) is True


def test_tree_transpose():
    outer = tu.tree_structure([0, 0])
    inner = tu.tree_structure((0, 0))
    assert tu.tree_transpose(outer, inner, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tu.tree_transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    inner = tu.tree_structure({"x": 0, "y": 0})
    assert tu.tree_transpose(outer, inner, [{"x": 1, "y": 2}, {"x": 3, "y": 4}]) == {
        "x": [1, 3],
        "y": [2, 4],
    }
    with pytest.raises(TypeError) as info:
        tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0)), [(1, 2), (3,)])
    assert "PyTreeDef([(*, *), (*,)])" in str(info.value)
    assert "PyTreeDef([(*, *), (*, *)])" in str(info.value)


def test_tree_broadcast():
    assert tu.tree_broadcast([1, 2], [(0, 0), {"a": 0}]) == [(1, 1), {"a": 2}]
    assert tu.tree_broadcast(5, {"a": [0, 0], "b": None}) == {"a": [5, 5], "b": None}
    assert tu.tree_broadcast({"a": 1, "b": None}, {"a": (0, 0), "b": None}) == {"a": (1, 1), "b": None}
    assert tu.tree_broadcast([(1, 2)], [[0, 0]], is_leaf=lambda x: isinstance(x, tuple)) == [[(1, 2), (1, 2)]]
    with pytest.raises(ValueError) as info:
        tu.tree_broadcast([1, 2], [(0, 0)])
    assert "List arity mismatch" in str(info.value) and "PyTreeDef([*, *])" in str(info.value)


def test_all_leaves():
    assert tu.all_leaves([1, "a", np.zeros(2)])
    assert tu.all_leaves([])
    assert not tu.all_leaves([1, (2,)])
    assert not tu.all_leaves([None])
    assert tu.all_leaves(iter([1, 2]))
    assert tu.all_leaves([(1, 2)], is_leaf=lambda x: isinstance(x, tuple))
    assert not tu.all_leaves([(1, 2), [3]], is_leaf=lambda x: isinstance(x, tuple))
    # Like JAX, is_leaf is also applied to the list of items itself.
    assert not tu.all_leaves([[1]], is_leaf=lambda x: isinstance(x, list))


def test_flatten_one_level_and_is_tree_node():
    # children as the node's flatten gives them, as in JAX
    assert tu.flatten_one_level({"b": {"c": 3}, "a": [1, 2]}) == (([1, 2], {"c": 3}), ("a", "b"))
    assert tu.flatten_one_level((1, 2)) == ((1, 2), None)
    assert tu.flatten_one_level([1, 2]) == ([1, 2], None)
    assert tu.flatten_one_level(None) == ((), None)
    assert tu.flatten_one_level(Point(1, 2)) == ([1, 2], Point)
    children, aux = tu.flatten_one_level(Box(1, 2, "q"))
    assert list(children) == [1, 2] and aux == "q"
    with pytest.raises(ValueError, match="leaf"):
        tu.flatten_one_level(1)
    assert tu.is_tree_node(tuple) and tu.is_tree_node(type(None)) and tu.is_tree_node(Point)
    assert tu.is_tree_node(Box) and tu.is_tree_node(collections.OrderedDict)
    assert not tu.is_tree_node(int) and not tu.is_tree_node(np.ndarray)


# ---------------------------------------------------------------------------
# Key paths.
# ---------------------------------------------------------------------------


def test_key_entries():
    cases = [
        (SequenceKey(0), "[0]", "SequenceKey(idx=0)", "idx", 0),
        (DictKey("k1"), "['k1']", "DictKey(key='k1')", "key", "k1"),
        (DictKey(1), "[1]", "DictKey(key=1)", "key", 1),
        (GetAttrKey("name"), ".name", "GetAttrKey(name='name')", "name", "name"),
        (FlattenedIndexKey(0), "[<flat index 0>]", "FlattenedIndexKey(key=0)", "key", 0),
    ]
    for key, s, r, attr, value in cases:
        assert str(key) == s
        assert repr(key) == r
        assert getattr(key, attr) == value
        assert type(key).__match_args__ == (attr,)
        assert key == type(key)(value) and hash(key) == hash(type(key)(value))
        assert pickle.loads(pickle.dumps(key)) == key
        with pytest.raises(AttributeError):
            setattr(key, attr, 99)
    assert SequenceKey(0) != FlattenedIndexKey(0)
    assert DictKey(0) != SequenceKey(0)
    assert SequenceKey(0) != SequenceKey(1)
    match DictKey("m"):
        case DictKey(key=k):
            assert k == "m"
        case _:
            pytest.fail("DictKey did not match its own pattern")


def test_keystr():
    path = (DictKey("foo"), SequenceKey(0), GetAttrKey("w"), FlattenedIndexKey(2))
    assert tu.keystr(path) == "['foo'][0].w[<flat index 2>]"
    assert tu.keystr(path, simple=True, separator="/") == "foo/0/w/2"
    assert tu.keystr(path, separator="|") == "['foo']|[0]|.w|[<flat index 2>]"
    assert tu.keystr(()) == ""
    assert tu.keystr(("a", 1)) == "a1"  # non-key entries use str()


def test_flatten_with_path_all_node_kinds():
    tree = {
        "seq": [1, (2,)],
        "nt": Point(3, 4),
        "box": Box(5, 6),
        "keyed": Keyed(7, 8),
        "none": None,
        "od": collections.OrderedDict(z=9),
    }
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert treedef == tu.tree_structure(tree)
    assert [v for _, v in pairs] == tu.tree_leaves(tree)
    assert [tu.keystr(p) for p, _ in pairs] == [
        "['box'][<flat index 0>]",
        "['box'][<flat index 1>]",
        "['keyed'].w",
        "['keyed'].bias",
        "['nt'].x",
        "['nt'].y",
        "['od']['z']",
        "['seq'][0]",
        "['seq'][1][0]",
    ]
    assert pairs[0][0] == (DictKey("box"), FlattenedIndexKey(0))
    assert tu.tree_leaves_with_path(tree) == pairs
    assert tu.tree_leaves_with_path(5) == [((), 5)]


def test_flatten_with_path_is_leaf():
    tree = [1, (2, 3)]
    pairs, treedef = tu.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert pairs == [((SequenceKey(0),), 1), ((SequenceKey(1),), (2, 3))]
    assert repr(treedef) == "PyTreeDef([*, *])"
    pairs = tu.tree_leaves_with_path(
        tree, is_leaf=lambda p, x: len(p) == 1, is_leaf_takes_path=True
    )
    assert [v for _, v in pairs] == [1, (2, 3)]


# ---------------------------------------------------------------------------
# Registration.
# ---------------------------------------------------------------------------


def test_register_pytree_node_custom_type():
    leaves, treedef = tu.tree_flatten([Box(1, (2, 3), "tg"), 4])
    assert leaves == [1, 2, 3, 4]
    assert repr(treedef) == "PyTreeDef([CustomNode(Box[tg], [*, (*, *)]), *])"
    out = treedef.unflatten([10, 20, 30, 40])
    assert out == [Box(10, (20, 30), "tg"), 40]
    assert tu.tree_map(lambda x: x * 2, Box(1, 2, "q")) == Box(2, 4, "q")
    # Subclasses of a registered type are leaves.
    SubBox = type("SubBox", (Box,), {})
    sb = SubBox(1, 2)
    assert tu.tree_leaves(sb) == [sb]


def test_unflatten_func_receives_tuple_and_flatten_may_return_iterator():
    received = []

    class Lazy:
        def __init__(self, *items):
            self.items = items

    tu.register_pytree_node(
        Lazy,
        lambda v: (iter(v.items), None),
        lambda _, ch: (received.append(ch), Lazy(*ch))[1],
    )
    leaves, treedef = tu.tree_flatten(Lazy(1, [2]))
    assert leaves == [1, 2]
    treedef.unflatten([3, 4])
    assert received == [(3, [4])] and type(received[0]) is tuple


@pytest.mark.parametrize(
    "nodetype", [tuple, list, dict, type(None), collections.OrderedDict, collections.defaultdict, Box, Partial]
)
def test_duplicate_registration_raises(nodetype):
    with pytest.raises(ValueError) as info:
        tu.register_pytree_node(nodetype, lambda x: ((), None), lambda a, c: None)
    assert repr(nodetype) in str(info.value)


def test_registration_after_type_was_seen_as_leaf():
    class Late:
        def __init__(self, v):
            self.v = v

    late = Late(1)
    assert tu.tree_leaves([late, late]) == [late, late]  # cached as a leaf
    tu.register_pytree_node(Late, lambda x: ((x.v,), None), lambda _, ch: Late(*ch))
    assert tu.tree_leaves([late, late]) == [1, 1]
    assert tu.tree_flatten((late,))[0] == [1]


def test_registering_a_namedtuple_overrides_namedtuple_handling():
    NT = collections.namedtuple("NT", "a b")
    tu.register_pytree_node(NT, lambda x: ((x.b,), x.a), lambda a, ch: NT(a, *ch))
    leaves, treedef = tu.tree_flatten(NT(1, 2))
    assert leaves == [2]
    assert repr(treedef) == "PyTreeDef(CustomNode(NT[1], [*]))"


def test_kind_cache_overflow_keeps_results_correct():
    classes = [type(f"T{i}", (), {}) for i in range(nodes._KIND_CACHE_LIMIT + 50)]
    objs = [c() for c in classes]
    assert tu.tree_leaves(objs) == objs
    assert tu.tree_leaves([Box(1, 2), Point(3, 4), None, (5,)]) == [1, 2, 3, 4, 5]
    assert len(nodes._kinds) <= nodes._KIND_CACHE_LIMIT


def test_register_pytree_with_keys_and_class_forms():
    @tu.register_pytree_with_keys_class
    class WithKeys:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return ((GetAttrKey("a"), self.a), (GetAttrKey("b"), self.b)), "meta"

        @classmethod
        def tree_unflatten(cls, aux, children):
            assert aux == "meta"
            return cls(*children)

    @tu.register_pytree_with_keys_class
    class WithBoth(WithKeys):
        flatten_calls = 0

        def tree_flatten(self):
            type(self).flatten_calls += 1
            return (self.a, self.b), "meta"

    for cls in (WithKeys, WithBoth):
        obj = cls(1, [2])
        assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(obj)] == [".a", ".b[0]"]
        leaves, treedef = tu.tree_flatten(obj)
        assert leaves == [1, 2]
        out = treedef.unflatten([3, 4])
        assert type(out) is cls and (out.a, out.b) == (3, [4])
    assert WithBoth.flatten_calls >= 1


def test_register_pytree_node_class_paths_use_flat_index():
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Vec(1, 2))] == [
        "[<flat index 0>]",
        "[<flat index 1>]",
    ]
    assert tu.tree_map(lambda x: -x, Vec(1, 2)) == Vec(-1, -2)


def test_register_pytree_node_with_explicit_keys_func():
    class Pair:
        def __init__(self, l, r):
            self.l, self.r = l, r

    tu.register_pytree_node(
        Pair,
        lambda p: ((p.l, p.r), None),
        lambda _, ch: Pair(*ch),
        lambda p: (((DictKey("l"), p.l), (DictKey("r"), p.r)), None),
    )
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Pair(1, 2))] == ["['l']", "['r']"]


def test_register_dataclass_as_bare_decorator():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Layer:
        w: object
        b: object
        name: str = dataclasses.field(default="dense", metadata=dict(static=True))

    layer = Layer(1, (2, 3), "l1")
    leaves, treedef = tu.tree_flatten(layer)
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(Layer[('l1',)], [*, (*, *)]))"
    assert treedef.node_data() == (Layer, ("l1",))
    out = treedef.unflatten([4, 5, 6])
    assert out == Layer(4, (5, 6), "l1")
    assert tu.tree_structure(Layer(1, 2, "other")) != tu.tree_structure(Layer(1, 2, "l1"))
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(layer)] == [".w", ".b[0]", ".b[1]"]


def test_register_dataclass_with_explicit_fields():
    @functools.partial(tu.register_dataclass, data_fields=["y"], meta_fields=["x"])
    @dataclasses.dataclass
    class S:
        x: int
        y: object

    leaves, treedef = tu.tree_flatten(S(1, [2]))
    assert leaves == [2]
    assert repr(treedef) == "PyTreeDef(CustomNode(S[(1,)], [[*]]))"
    assert treedef.unflatten([9]) == S(1, [9])

    class Plain:  # not a dataclass: explicit fields are required
        def __init__(self, a, b):
            self.a, self.b = a, b

    assert tu.register_dataclass(Plain, data_fields=["a"], meta_fields=["b"]) is Plain
    out = tu.tree_unflatten(tu.tree_structure(Plain(1, "m")), [5])
    assert type(out) is Plain and (out.a, out.b) == (5, "m")


def test_register_dataclass_drop_fields():
    @dataclasses.dataclass
    class D:
        x: int
        y: int
        z: int = dataclasses.field(init=False, default=0)

    with pytest.raises(ValueError, match=r"missing init fields \['y'\]"):
        tu.register_dataclass(D, data_fields=["x"], meta_fields=[])
    tu.register_dataclass(D, data_fields=["x"], meta_fields=[], drop_fields=["y"])
    assert tu.tree_leaves(D(1, 2)) == [1]
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_dataclass(D, data_fields=["x"], meta_fields=[], drop_fields=["y"])


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class E:
        a: int
        b: int

    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(E, data_fields=["a"])
    with pytest.raises(TypeError, match="not one"):
        tu.register_dataclass(type("NotDC", (), {}))
    with pytest.raises(ValueError, match="unknown or non-init fields"):
        tu.register_dataclass(E, data_fields=["a", "b", "c"], meta_fields=[])
    with pytest.raises(ValueError, match="both data and meta"):
        tu.register_dataclass(type("NotDC2", (), {}), data_fields=["a"], meta_fields=["a"])


def test_register_dataclass_copies_field_lists():
    @dataclasses.dataclass
    class F:
        a: int
        b: int

    data, meta = ["a"], ["b"]
    tu.register_dataclass(F, data_fields=data, meta_fields=meta)
    data.append("b")
    assert tu.tree_leaves(F(1, 2)) == [1]


def test_register_static():
    @tu.register_static
    class Mode:
        def __init__(self, name):
            self.name = name

        def __eq__(self, other):
            return type(other) is Mode and other.name == self.name

        def __hash__(self):
            return hash(self.name)

        def __repr__(self):
            return f"Mode({self.name})"

    leaves, treedef = tu.tree_flatten([Mode("train"), 1])
    assert leaves == [1]
    assert repr(treedef) == "PyTreeDef([CustomNode(Mode[Mode(train)], []), *])"
    assert treedef.unflatten([2]) == [Mode("train"), 2]
    assert tu.tree_structure(Mode("eval")) != tu.tree_structure(Mode("train"))
    assert tu.tree_leaves_with_path([Mode("x"), 1]) == [((SequenceKey(1),), 1)]


# ---------------------------------------------------------------------------
# Partial.
# ---------------------------------------------------------------------------


def test_partial_is_a_pytree():
    p = Partial(operator.add, 1)
    assert p(2) == 3
    assert isinstance(p, functools.partial)
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1]
    assert repr(treedef) == f"PyTreeDef(CustomNode(Partial[{operator.add}], [(*,), {{}}]))"
    doubled = tu.tree_map(lambda x: x * 10, p)
    assert type(doubled) is Partial and doubled(2) == 12
    kw = Partial(lambda a, *, b: a - b, b=5)
    assert tu.tree_leaves(kw) == [5]
    assert tu.tree_map(lambda x: x + 1, kw)(10) == 4
    assert [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(kw)] == ["[<flat index 1>]['b']"]
    assert tu.tree_structure(Partial(operator.add)) == tu.tree_structure(Partial(operator.add))
    assert tu.tree_structure(Partial(operator.add)) != tu.tree_structure(Partial(operator.sub))


def test_partial_of_partial_keeps_inner_arguments_static():
    inner = functools.partial(operator.sub, 10)
    p = Partial(inner, 3)
    assert p() == 7
    assert tu.tree_leaves(p) == [3]
    assert p.func.func is operator.sub and p.func.args == (10,)
    assert tu.tree_map(lambda x: x + 1, p)() == 6
    assert tu.tree_leaves(Partial(Partial(operator.add, 1), 2)) == [2]
    p2 = pickle.loads(pickle.dumps(Partial(inner, 3)))
    assert p2() == 7 and tu.tree_leaves(p2) == [3]


# ---------------------------------------------------------------------------
# The plax.tree namespace, docs, module hygiene.
# ---------------------------------------------------------------------------

TREE_NAMES = {
    "map": "tree_map",
    "flatten": "tree_flatten",
    "unflatten": "tree_unflatten",
    "leaves": "tree_leaves",
    "structure": "tree_structure",
    "reduce": "tree_reduce",
    "reduce_associative": "tree_reduce_associative",
    "all": "tree_all",
    "transpose": "tree_transpose",
    "map_with_path": "tree_map_with_path",
    "flatten_with_path": "tree_flatten_with_path",
    "leaves_with_path": "tree_leaves_with_path",
    "broadcast": "tree_broadcast",
}


def test_tree_namespace():
    for short, long in TREE_NAMES.items():
        assert getattr(ptree, short) is getattr(tu, long), short
    assert set(ptree.__all__) == set(TREE_NAMES) | {"static"}  # static: a dataclass field
    assert ptree.map(lambda x: x + 1, {"a": (1, None)}) == {"a": (2, None)}
    assert ptree.all([1, 0]) is False


def test_public_api_is_exported_and_documented():
    for name in tu.__all__:
        obj = getattr(tu, name)
        if callable(obj) and name not in ("KeyEntry", "KeyPath"):
            doc = obj.__doc__ or ""
            assert doc.strip(), f"{name} has no docstring"
            assert "Example" in doc, f"{name} docstring has no example"


def test_docs_page_examples():
    text = (REPO / "docs" / "pytrees.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    parser = doctest.DocTestParser()
    test = parser.get_doctest("\n".join(blocks), {}, "pytrees.md", "docs/pytrees.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 10
    assert result.failed == 0


PYTREE_PATHS = [TREE_UTIL_PATH, *sorted((TREE_UTIL_PATH.parent / "pytrees").glob("*.py"))]


@pytest.mark.parametrize("path", PYTREE_PATHS, ids=lambda p: p.name)
def test_pytree_modules_import_only_the_standard_library(path):
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            if not node.module.startswith("plax.pytrees"):  # the engine is their only plax import
                imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "collections", "functools", "dataclasses", "typing"}


def test_import_is_light():
    # A stand-in ``plax`` package (so plax/__init__ does not run) whose path is the real one:
    # then only the pytree modules themselves are executed.
    code = (
        "import importlib.util, sys, types\n"
        f"pkg = types.ModuleType('plax'); pkg.__path__ = [{str(TREE_UTIL_PATH.parent)!r}]\n"
        "sys.modules['plax'] = pkg\n"
        "before = set(sys.modules)\n"
        "import plax.tree_util as mod\n"
        "new = set(sys.modules) - before\n"
        "print(sorted(new))\n"
        "assert mod.tree_leaves([1, (2, None)]) == [1, 2]\n"
        "assert not new & {'typing', 'dataclasses', 'numpy', 'inspect'}, new\n"
        "assert {m for m in new if m.startswith('plax')} == {'plax.tree_util', 'plax.pytrees',\n"
        "    'plax.pytrees.engine', 'plax.pytrees.keys', 'plax.pytrees.nodes'}, new\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


# ---------------------------------------------------------------------------
# Property test.
# ---------------------------------------------------------------------------

_keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)


def _containers(children):
    return st.one_of(
        st.tuples(children, children),
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(_keys, children, max_size=4),
        st.tuples(children, children).map(lambda xy: Point(*xy)),
        st.dictionaries(_keys, children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(_keys, children, max_size=3).map(
            lambda d: collections.defaultdict(list, d)
        ),
        st.tuples(children, children).map(lambda ab: Box(*ab)),
    )


trees = st.recursive(
    st.one_of(st.integers(-5, 5), st.none(), st.text(max_size=2)),
    _containers,
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(trees)
def test_roundtrip_property(tree):
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == tu.tree_leaves(tree)
    assert treedef.num_leaves == len(leaves)
    assert same(tu.tree_unflatten(tu.tree_structure(tree), tu.tree_leaves(tree)), tree)
    # Past the threshold the generated builder takes over; it must agree.
    for _ in range(engine._COMPILE_AFTER + 1):
        rebuilt = treedef.unflatten(leaves)
    assert same(rebuilt, tree)
    assert treedef.flatten_up_to(tree) == leaves
    pairs, treedef2 = tu.tree_flatten_with_path(tree)
    assert treedef2 == treedef and [v for _, v in pairs] == leaves
    assert pickle.loads(pickle.dumps(treedef)) == treedef


@settings(max_examples=200, deadline=None)
@given(trees)
def test_tree_map_agrees_with_flatten_unflatten(tree):
    # tree_map of a single tree takes a one-pass route; it must match the
    # general definition, including the order in which f sees the leaves.
    seen = []

    def f(x):
        seen.append(x)
        return ("mapped", x)

    leaves, treedef = tu.tree_flatten(tree)
    assert same(tu.tree_map(f, tree), treedef.unflatten([("mapped", x) for x in leaves]))
    assert seen == leaves
    assert same(tu.tree_map(lambda x, y: ("mapped", x), tree, tree), tu.tree_map(f, tree))


# ---------------------------------------------------------------------------
# Comparisons with real JAX (skipped when it is not installed).
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jtu():
    jax = pytest.importorskip("jax")
    jtu = jax.tree_util
    for cls, flat, unflat in [
        (Box, lambda x: ((x.a, x.b), x.tag), lambda tag, ch: Box(*ch, tag=tag)),
    ]:
        try:
            jtu.register_pytree_node(cls, flat, unflat)
        except ValueError:
            pass  # already registered by an earlier test module
    return jtu


JAX_TREES = [case[0] for case in BUILTIN_CASES] + [
    [Point(1, (2, 3)), {"z": None, "a": [Box(1, {"q": 2}, "aux")]}],
    {"x": collections.OrderedDict(b=1, a=(2, 3)), "y": collections.defaultdict(int, {"k": [4]})},
    ((), [None], {}, 0),
]


@pytest.mark.parametrize("tree", JAX_TREES, ids=range(len(JAX_TREES)))
def test_matches_jax(jtu, tree):
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(tree)
    assert leaves == jleaves
    assert repr(treedef) == repr(jtreedef)
    assert treedef.num_nodes == jtreedef.num_nodes
    assert [repr(c) for c in treedef.children()] == [repr(c) for c in jtreedef.children()]
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
    jpaths = [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)]
    assert paths == jpaths
    simple = [tu.keystr(p, simple=True, separator="/") for p, _ in tu.tree_leaves_with_path(tree)]
    jsimple = [jtu.keystr(p, simple=True, separator="/") for p, _ in jtu.tree_leaves_with_path(tree)]
    assert simple == jsimple
    marks = [f"v{i}" for i in range(len(leaves))]
    assert same(treedef.unflatten(marks), jtreedef.unflatten(marks))
    assert same(tu.tree_map(str, tree), jtu.tree_map(str, tree))


def test_key_entries_match_jax(jtu):
    for ours, theirs in [
        (SequenceKey(3), jtu.SequenceKey(3)),
        (DictKey("a"), jtu.DictKey("a")),
        (GetAttrKey("n"), jtu.GetAttrKey("n")),
        (FlattenedIndexKey(2), jtu.FlattenedIndexKey(2)),
    ]:
        assert str(ours) == str(theirs)
        assert repr(ours) == repr(theirs)


def test_error_types_match_jax(jtu):
    def error_type(fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001
            return type(exc)
        return None

    for mod in (tu, jtu):
        mod_cases = [
            lambda: mod.tree_map(lambda a, b: a, (1, 2), (1, 2, 3)),
            lambda: mod.tree_unflatten(mod.tree_structure((1, 2)), [1]),
            lambda: mod.tree_structure({"a": 1}).flatten_up_to({"b": 1}),
            lambda: mod.tree_reduce(operator.add, []),
            lambda: mod.register_pytree_node(tuple, lambda x: ((), None), lambda a, c: None),
            lambda: mod.tree_transpose(mod.tree_structure([0, 0]), mod.tree_structure((0, 0)), [(1,), (2,)]),
        ]
        if mod is tu:
            ours = [error_type(c) for c in mod_cases]
        else:
            theirs = [error_type(c) for c in mod_cases]
    assert ours == theirs == [ValueError, ValueError, ValueError, TypeError, ValueError, TypeError]


@settings(max_examples=100, deadline=None)
@given(trees)
def test_matches_jax_property(tree):
    jax = pytest.importorskip("jax")
    jtu = jax.tree_util
    try:
        jtu.register_pytree_node(Box, lambda x: ((x.a, x.b), x.tag), lambda tag, ch: Box(*ch, tag=tag))
    except ValueError:
        pass
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(tree)
    assert leaves == jleaves
    assert repr(treedef) == repr(jtreedef)
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)] == [
        jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)
    ]


# ---------------------------------------------------------------------------
# Timings (run this file as a script).
# ---------------------------------------------------------------------------


def _bench():  # pragma: no cover - manual
    import timeit

    a, b = np.ones(3), np.ones(3)
    small = {"w": a, "b": (b, [a, None]), "c": 1.0}
    modules = [("plax", tu)]
    try:
        import jax.tree_util as jtu_mod

        modules.append(("jax", jtu_mod))
    except ImportError:
        pass

    def best(fn, number=20_000):
        return min(timeit.repeat(fn, number=number, repeat=30)) / number * 1e6

    rows: dict[str, dict[str, float]] = {}

    def record(op, name, value):
        row = rows.setdefault(op, {})
        row[name] = min(value, row.get(name, float("inf")))

    # Two rounds, alternating libraries, keeping the best: the first round
    # also serves as warm-up.
    for _ in range(2):
        for name, m in modules:
            _, pair_def = m.tree_flatten((a, b))
            small_leaves, small_def = m.tree_flatten(small)
            for _ in range(20):
                small_def.unflatten(small_leaves)
            fresh = iter([m.tree_structure(small) for _ in range(30 * 5_000)])
            record("tree_flatten((a, b))", name, best(lambda: m.tree_flatten((a, b))))
            record("tree_unflatten((a, b))", name, best(lambda: pair_def.unflatten([a, b])))
            record("tree_unflatten(small), reused def", name,
                   best(lambda: small_def.unflatten(small_leaves)))
            record("tree_unflatten(small), fresh def", name,
                   best(lambda: next(fresh).unflatten(small_leaves), number=5_000))
            record("tree_flatten(small)", name, best(lambda: m.tree_flatten(small)))
            record("tree_leaves(small)", name, best(lambda: m.tree_leaves(small)))
            record("tree_map(f, small)", name, best(lambda: m.tree_map(lambda x: x, small)))
    names = [n for n, _ in modules]
    print(f"{'operation':40s}" + "".join(f"{n:>10s}" for n in names) + "   (microseconds)")
    for op, vals in rows.items():
        print(f"{op:40s}" + "".join(f"{vals[n]:10.3f}" for n in names))


if __name__ == "__main__":  # pragma: no cover
    _bench()
